// The `start` command: a whole control plane on loopback, each component a child process of this
// binary. It owns the run's temporary directory (certificates, keys, kubeconfigs, etcd's data,
// logs), the four child processes, and their shutdown: on SIGTERM or SIGINT, or when a component
// exits, it stops every child by its own pid (SIGTERM, then SIGKILL after a grace period) and
// removes the temporary directory. Certificates and kubeconfigs are in pki.go.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serviceCIDR is the Services' virtual IP range; its first address is the `kubernetes` Service's,
// so the serving certificate names it too.
const (
	serviceCIDR      = "10.0.0.0/24"
	kubernetesSvcIP  = "10.0.0.1"
	saIssuer         = "https://kubernetes.default.svc.cluster.local"
	readyTimeout     = 180 * time.Second
	stopGrace        = 15 * time.Second
	healthPollPeriod = 200 * time.Millisecond
)

// component is one running child: its name, process and log file.
type component struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has been waited for
	err  error         // the wait's result, set before done closes
}

func runStart(args []string) int {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "where to write the admin kubeconfig (default: in the run's temporary directory)")
	logDir := fs.String("log-dir", "", "where the components write their logs, kept after stop (default: in the run's temporary directory, removed on stop)")
	verbosity := fs.Int("v", 0, "klog verbosity of kube-apiserver, kube-controller-manager and kube-scheduler")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "start: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start: cannot find this binary: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "cinder-control-plane-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "start: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "start: temporary directory %s\n", dir)
	p := &plane{self: self, dir: dir, logDir: *logDir, verbosity: *verbosity}
	if p.logDir == "" {
		p.logDir = filepath.Join(dir, "logs")
	}
	if *kubeconfig == "" {
		*kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	}
	p.adminKubeconfig, err = filepath.Abs(*kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start: --kubeconfig %q: %v\n", *kubeconfig, err)
		return 2
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	code := p.run(signals)
	p.stop()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "start: removing %s: %v\n", dir, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// plane is one run of the control plane.
type plane struct {
	self, dir, logDir, adminKubeconfig string
	verbosity                          int
	pki                                *pki
	components                         []*component
}

// run starts the components in order, waits for each to be healthy, prints the kubeconfig, then
// waits for a signal or a component's exit. Its result is the exit status.
func (p *plane) run(signals <-chan os.Signal) int {
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case s := <-signals:
			fmt.Fprintf(os.Stderr, "start: %v, stopping\n", s)
			cancel()
		case <-ctx.Done():
		}
	}()
	fail := func(err error) int {
		if ctx.Err() != nil {
			return 0 // a signal during start-up is an ordinary stop
		}
		fmt.Fprintf(os.Stderr, "start: %v\n", err)
		return 1
	}

	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		return fail(err)
	}
	var err error
	if p.pki, err = newPKI(filepath.Join(p.dir, "pki")); err != nil {
		return fail(fmt.Errorf("certificates: %w", err))
	}
	ports, err := freePorts(5)
	if err != nil {
		return fail(err)
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	kcmKubeconfig := filepath.Join(p.dir, "controller-manager.kubeconfig")
	schedKubeconfig := filepath.Join(p.dir, "scheduler.kubeconfig")
	for _, k := range []struct {
		path string
		user clientCert
	}{
		{p.adminKubeconfig, p.pki.admin},
		{kcmKubeconfig, p.pki.controllerManager},
		{schedKubeconfig, p.pki.scheduler},
	} {
		if err := writeKubeconfig(k.path, server, p.pki.caPEM, k.user); err != nil {
			return fail(fmt.Errorf("kubeconfig %s: %w", k.path, err))
		}
	}
	pk := p.pki.paths
	v := "--v=" + strconv.Itoa(p.verbosity)

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	if err := p.launch(ctx, "etcd",
		"--data-dir="+filepath.Join(p.dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--unsafe-no-fsync",
	); err != nil {
		return fail(err)
	}
	if err := p.waitHealthy(ctx, "etcd", etcdURL+"/health", nil, func(body string) bool {
		return strings.Contains(body, `"health":"true"`)
	}); err != nil {
		return fail(err)
	}

	if err := p.launch(ctx, "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(p.dir, "apiserver"),
		"--tls-cert-file="+pk.servingCert,
		"--tls-private-key-file="+pk.servingKey,
		"--client-ca-file="+pk.caCert,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--service-cluster-ip-range="+serviceCIDR,
		"--service-account-issuer="+saIssuer,
		"--service-account-key-file="+pk.saPub,
		"--service-account-signing-key-file="+pk.saKey,
		// The lease reconciler would publish 127.0.0.1 as the `kubernetes` Service's endpoint,
		// which Endpoints validation refuses (loopback); nothing here reaches the API server
		// through that Service.
		"--endpoint-reconciler-type=none",
		// The aggregation layer, as kubeadm configures it: the API server proxies to extension
		// API servers with the front-proxy certificate and the user in these headers, and
		// publishes the CA in kube-system/extension-apiserver-authentication, which the
		// controller-manager's and scheduler's delegated authentication read.
		"--requestheader-client-ca-file="+pk.caCert,
		"--requestheader-allowed-names="+frontProxyUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+pk.frontProxyCert,
		"--proxy-client-key-file="+pk.frontProxyKey,
		v,
	); err != nil {
		return fail(err)
	}
	adminTLS, err := p.pki.clientTLS(p.pki.admin)
	if err != nil {
		return fail(err)
	}
	if err := p.waitHealthy(ctx, "kube-apiserver", server+"/readyz", adminTLS, nil); err != nil {
		return fail(err)
	}

	serverTLS := p.pki.serverOnlyTLS()
	if err := p.launch(ctx, "kube-controller-manager",
		"--kubeconfig="+kcmKubeconfig,
		"--authentication-kubeconfig="+kcmKubeconfig,
		"--authorization-kubeconfig="+kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(kcmPort),
		"--tls-cert-file="+pk.servingCert,
		"--tls-private-key-file="+pk.servingKey,
		"--leader-elect=false",
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--root-ca-file="+pk.caCert,
		"--service-account-private-key-file="+pk.saKey,
		"--cluster-signing-cert-file="+pk.caCert,
		"--cluster-signing-key-file="+pk.caKey,
		"--service-cluster-ip-range="+serviceCIDR,
		v,
	); err != nil {
		return fail(err)
	}
	if err := p.launch(ctx, "kube-scheduler",
		"--kubeconfig="+schedKubeconfig,
		"--authentication-kubeconfig="+schedKubeconfig,
		"--authorization-kubeconfig="+schedKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(schedPort),
		"--tls-cert-file="+pk.servingCert,
		"--tls-private-key-file="+pk.servingKey,
		"--leader-elect=false",
		v,
	); err != nil {
		return fail(err)
	}
	for _, c := range []struct {
		name string
		port int
	}{{"kube-controller-manager", kcmPort}, {"kube-scheduler", schedPort}} {
		url := "https://127.0.0.1:" + strconv.Itoa(c.port) + "/healthz"
		if err := p.waitHealthy(ctx, c.name, url, serverTLS, nil); err != nil {
			return fail(err)
		}
	}

	fmt.Fprintf(os.Stderr, "start: ready in %.1f s (API server %s, logs in %s)\n",
		time.Since(began).Seconds(), server, p.logDir)
	for _, c := range p.components {
		fmt.Fprintf(os.Stderr, "start: %s pid %d rss %d MiB\n", c.name, c.cmd.Process.Pid, rssMiB(c.cmd.Process.Pid))
	}
	fmt.Printf("kubeconfig: %s\nexport KUBECONFIG=%s\n", p.adminKubeconfig, p.adminKubeconfig)

	exited := make(chan *component, len(p.components))
	for _, c := range p.components {
		go func() { <-c.done; exited <- c }()
	}
	select {
	case <-ctx.Done():
		return 0
	case c := <-exited:
		if ctx.Err() != nil {
			return 0
		}
		return fail(fmt.Errorf("%s exited (%v); its log's end:\n%s", c.name, c.err, tail(c.log, 20)))
	}
}

// launch starts one component as this binary under the component's name, in its own process
// group (a terminal's Ctrl-C reaches `start` alone, which stops the children in order), with
// SIGKILL as its parent-death signal so no component outlives a killed `start`.
func (p *plane) launch(ctx context.Context, name string, args ...string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	logPath := filepath.Join(p.logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path:   p.self,
		Args:   append([]string{name}, args...),
		Stdout: logFile,
		Stderr: logFile,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c := &component{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	p.components = append(p.components, c)
	return nil
}

// waitHealthy polls url until it answers 200 (and ok accepts the body, when given), the
// component exits, ctx ends, or readyTimeout passes.
func (p *plane) waitHealthy(ctx context.Context, name, url string, tlsConfig *tls.Config, ok func(string) bool) error {
	c := p.components[len(p.components)-1]
	for _, pc := range p.components {
		if pc.name == name {
			c = pc
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	deadline := time.Now().Add(readyTimeout)
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && (ok == nil || ok(string(body))) {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return fmt.Errorf("%s exited before it was healthy (%v); its log's end:\n%s", name, c.err, tail(c.log, 20))
		case <-time.After(healthPollPeriod):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy at %s after %v (last answer: %s); its log's end:\n%s",
				name, url, readyTimeout, last, tail(c.log, 20))
		}
	}
}

// stop ends every component, the last started first, each by its own pid: SIGTERM, then SIGKILL
// when it has not exited after stopGrace.
func (p *plane) stop() {
	for i := len(p.components) - 1; i >= 0; i-- {
		c := p.components[i]
		select {
		case <-c.done:
			continue
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(stopGrace):
			fmt.Fprintf(os.Stderr, "start: %s (pid %d) ignored SIGTERM for %v, killing it\n", c.name, c.cmd.Process.Pid, stopGrace)
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}

// freePorts reserves n distinct free loopback ports by listening on port 0, then releases them
// for the components to bind.
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("no free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// rssMiB is a process's resident set in MiB from /proc, 0 when it cannot be read.
func rssMiB(pid int) int {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, found := strings.CutPrefix(s.Text(), "VmRSS:"); found {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}

// tail is the last n lines of a file, for a failing component's reason.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
