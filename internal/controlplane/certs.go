package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of one cluster: a CA that signs the API server's
// serving certificate (and may sign CSRs through the controller manager), and
// the service-account token signing key pair.
type pki struct {
	caCert, caKey           string // files
	servingCert, servingKey string
	saKey, saPub            string
	caPEM                   []byte
}

// newPKI writes fresh keys into dir. ECDSA keeps generation fast on slow
// machines; the service-account key is RSA because kube-apiserver's default
// token signing algorithm is RS256.
func newPKI(dir string) (*pki, error) {
	p := &pki{
		caCert:      filepath.Join(dir, "ca.crt"),
		caKey:       filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		saPub:       filepath.Join(dir, "sa.pub"),
	}
	now := time.Now()
	ca, err := newCA(now)
	if err != nil {
		return nil, err
	}
	p.caPEM = ca.certPEM
	serving, err := newServingCert(now, ca)
	if err != nil {
		return nil, err
	}
	sa, err := newServiceAccountKeys()
	if err != nil {
		return nil, err
	}
	files := []struct {
		path string
		pem  []byte
	}{
		{p.caCert, ca.certPEM},
		{p.caKey, ca.keyPEM},
		{p.servingCert, serving.certPEM},
		{p.servingKey, serving.keyPEM},
		{p.saPub, sa.certPEM},
		{p.saKey, sa.keyPEM},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.pem, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", filepath.Base(f.path), err)
		}
	}
	return p, nil
}

// keyPair is a certificate (or, for the service-account keys, a public
// key) and its private key, PEM-encoded, as the components read them.
type keyPair struct {
	certPEM, keyPEM []byte
	// cert and key sign other certificates; set for the CA only.
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newCA makes a self-signed CA valid for a day around now.
func newCA(now time.Time) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mcm-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding CA key: %w", err)
	}
	return &keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		cert:    cert,
		key:     key,
	}, nil
}

// newServingCert makes the API server's serving certificate, signed by ca,
// for the loopback address and the names clients in a cluster use.
func newServingCert(now time.Time, ca *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding serving key: %w", err)
	}
	return &keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// newServiceAccountKeys makes the key pair that signs and verifies
// service-account tokens; certPEM holds the public key.
func newServiceAccountKeys() (*keyPair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding service-account public key: %w", err)
	}
	return &keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	}, nil
}
