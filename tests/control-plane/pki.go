// The control plane's certificates and kubeconfigs: it owns generating, for one run, a CA, a
// serving certificate for loopback and the `kubernetes` Service's names, client certificates for
// the admin (group system:masters), kube-controller-manager, kube-scheduler and the API server's
// front proxy (the aggregation layer's identity towards extension API servers), and the
// service-account signing key pair; and writing the files the components and kubeconfigs read.
// All keys are ECDSA P-256 (ES256 for service-account tokens), generated fresh for each run.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity outlasts any run of the tests; each run makes its own certificates.
const certValidity = 7 * 24 * time.Hour

// frontProxyUser is the common name of the API server's front-proxy client certificate.
const frontProxyUser = "front-proxy-client"

// clientCert is one identity's certificate and key, PEM-encoded.
type clientCert struct {
	user            string
	certPEM, keyPEM []byte
}

// pkiPaths are the files the components' flags name.
type pkiPaths struct {
	caCert, caKey, servingCert, servingKey, saKey, saPub, frontProxyCert, frontProxyKey string
}

type pki struct {
	caPEM                               []byte
	caPool                              *x509.CertPool
	admin, controllerManager, scheduler clientCert
	paths                               pkiPaths
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "cinder-control-plane-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p := &pki{caPEM: pemBlock("CERTIFICATE", caDER), caPool: x509.NewCertPool()}
	p.caPool.AddCert(ca)
	caKeyPEM, err := keyPEM(caKey)
	if err != nil {
		return nil, err
	}

	issue := func(tmpl *x509.Certificate) (certPEM, kPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore = now.Add(-time.Hour)
		tmpl.NotAfter = now.Add(certValidity)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kPEM, err = keyPEM(key)
		return pemBlock("CERTIFICATE", der), kPEM, err
	}

	servingCert, servingKey, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(kubernetesSvcIP)},
	})
	if err != nil {
		return nil, err
	}
	client := func(user string, groups ...string) (clientCert, error) {
		c, k, err := issue(&x509.Certificate{
			Subject:     pkix.Name{CommonName: user, Organization: groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		return clientCert{user: user, certPEM: c, keyPEM: k}, err
	}
	if p.admin, err = client("cinder-admin", "system:masters"); err != nil {
		return nil, err
	}
	// The bootstrap RBAC roles of a real cluster bind these two user names.
	if p.controllerManager, err = client("system:kube-controller-manager"); err != nil {
		return nil, err
	}
	if p.scheduler, err = client("system:kube-scheduler"); err != nil {
		return nil, err
	}
	// The name --requestheader-allowed-names admits: only this certificate may assert a user in
	// the request headers, although the CA is shared with the other clients.
	frontProxy, err := client(frontProxyUser)
	if err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}

	p.paths = pkiPaths{
		caCert:         filepath.Join(dir, "ca.crt"),
		caKey:          filepath.Join(dir, "ca.key"),
		servingCert:    filepath.Join(dir, "serving.crt"),
		servingKey:     filepath.Join(dir, "serving.key"),
		saKey:          filepath.Join(dir, "sa.key"),
		saPub:          filepath.Join(dir, "sa.pub"),
		frontProxyCert: filepath.Join(dir, "front-proxy-client.crt"),
		frontProxyKey:  filepath.Join(dir, "front-proxy-client.key"),
	}
	for path, data := range map[string][]byte{
		p.paths.caCert:         p.caPEM,
		p.paths.caKey:          caKeyPEM,
		p.paths.servingCert:    servingCert,
		p.paths.servingKey:     servingKey,
		p.paths.saKey:          saKeyPEM,
		p.paths.saPub:          pemBlock("PUBLIC KEY", saPubDER),
		p.paths.frontProxyCert: frontProxy.certPEM,
		p.paths.frontProxyKey:  frontProxy.keyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// clientTLS is a TLS configuration that trusts the CA and presents c, for health checks.
func (p *pki) clientTLS(c clientCert) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(c.certPEM, c.keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// serverOnlyTLS trusts the CA and presents no certificate (the components' /healthz is open).
func (p *pki) serverOnlyTLS() *tls.Config {
	return &tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12}
}

// writeKubeconfig writes a kubeconfig for user at server, trusting the CA, readable by its owner
// only (it holds a private key).
func writeKubeconfig(path, server string, caPEM []byte, user clientCert) error {
	b64 := base64.StdEncoding.EncodeToString
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cinder-control-plane
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: cinder-control-plane
  context:
    cluster: cinder-control-plane
    user: %s
current-context: cinder-control-plane
`, server, b64(caPEM), user.user, b64(user.certPEM), b64(user.keyPEM), user.user)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o600)
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// serial is a random 127-bit certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial would still make a valid chain.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
