// Package main is the multicall binary of the real control plane: it owns dispatching a command
// name (argv[0]'s base name, or else the first argument) to kube-apiserver,
// kube-controller-manager, kube-scheduler, an embedded etcd, or `start`, which runs all four as
// child processes of this same binary (start.go).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones, as the upstream kube-apiserver and controller-manager link it

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format, as upstream registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics, as upstream registers them
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as upstream registers it
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = "usage: cinder-control-plane {start|kube-apiserver|kube-controller-manager|kube-scheduler|etcd} [flags]"

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if !isCommand(name) {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	os.Exit(run(name, args))
}

func isCommand(name string) bool {
	switch name {
	case "start", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd":
		return true
	}
	return false
}

func run(name string, args []string) int {
	switch name {
	case "kube-apiserver":
		return runCobra(apiserver.NewAPIServerCommand(), args)
	case "kube-controller-manager":
		return runCobra(controllermanager.NewControllerManagerCommand(), args)
	case "kube-scheduler":
		return runCobra(scheduler.NewSchedulerCommand(), args)
	case "etcd":
		return runEtcd(args)
	case "start":
		return runStart(args)
	}
	fmt.Fprintf(os.Stderr, "unknown command %q\n%s\n", name, usage)
	return 2
}

func runCobra(cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	return cli.Run(cmd)
}
