package metricsauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

const (
	// certCheckPeriod is how often, at most, the files of
	// --metrics-cert-file and --metrics-key-file are looked at for a
	// renewed certificate: at a TLS handshake, so that an idle server
	// does nothing.
	certCheckPeriod = 10 * time.Second
	// selfSignedValidity of the certificate generated at every start.
	// No client can verify it (it is new at each start, and signed by
	// nobody), so its end matters little; a year keeps it plausible.
	selfSignedValidity = 365 * 24 * time.Hour
)

// TLSConfig returns the TLS configuration of --metrics-secure: the
// certificate of certFile and keyFile, reread when the files change (a
// Secret volume renewed by cert-manager), or, without them, a self-signed
// certificate generated now for address. It also returns what to log
// about the certificate. HTTP/2 is not offered: HTTP/1.1 is all a scrape
// or a probe needs, and it keeps HTTP/2's attack surface (rapid reset)
// away, as controller-runtime does by default.
func TLSConfig(certFile, keyFile, address string, clk clock.PassiveClock, log logr.Logger) (*tls.Config, []any, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if certFile == "" {
		cert, err := selfSignedCertificate(address, clk.Now())
		if err != nil {
			return nil, nil, fmt.Errorf("generating a self-signed serving certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, []any{"certificate", "self-signed", "sha256", fingerprint(cert.Leaf)}, nil
	}
	files := &certFiles{certFile: certFile, keyFile: keyFile, clock: clk, log: log}
	if err := files.load(); err != nil {
		return nil, nil, err
	}
	cfg.GetCertificate = files.get
	return cfg, []any{"certificate", certFile, "notAfter", files.cert.Leaf.NotAfter}, nil
}

// certFiles serves the certificate of two PEM files, reloaded when either
// file's modification time or size changes. A pair that does not load (a
// renewal caught between its two files) keeps the previous certificate in
// service and is tried again once a file changes again.
type certFiles struct {
	certFile, keyFile string
	clock             clock.PassiveClock
	log               logr.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // of the files when last loaded or tried
	checked time.Time
}

// load loads the pair for the first time.
func (f *certFiles) load() error {
	stamp, err := f.stampNow()
	if err == nil {
		var cert tls.Certificate
		if cert, err = tls.LoadX509KeyPair(f.certFile, f.keyFile); err == nil {
			f.cert, f.stamp, f.checked = &cert, stamp, f.clock.Now()
			return nil
		}
	}
	return fmt.Errorf("--metrics-cert-file and --metrics-key-file: %w", err)
}

func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.clock.Now(); now.Sub(f.checked) >= certCheckPeriod {
		f.checked = now
		f.reload()
	}
	return f.cert, nil
}

// reload loads the pair if the files changed; call it with mu held.
func (f *certFiles) reload() {
	stamp, err := f.stampNow()
	if err != nil {
		f.log.Error(err, "Cannot look at the serving certificate's files; serving the certificate loaded before")
		return
	}
	if stamp == f.stamp {
		return
	}
	f.stamp = stamp
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		f.log.Error(err, "Cannot load the changed serving certificate; serving the one loaded before until the files change again",
			"certFile", f.certFile, "keyFile", f.keyFile)
		return
	}
	f.cert = &cert
	f.log.Info("Loaded the changed serving certificate", "certFile", f.certFile, "notAfter", cert.Leaf.NotAfter, "sha256", fingerprint(cert.Leaf))
}

// stampNow identifies the files' current contents by their modification
// times and sizes. Stat follows symbolic links, so a Secret volume's
// atomic swap of its data directory shows as a change.
func (f *certFiles) stampNow() (string, error) {
	var stamp string
	for _, name := range []string{f.certFile, f.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%d/%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return stamp, nil
}

// selfSignedCertificate returns an ECDSA P-256 certificate for localhost,
// the loopback addresses, the host's name (a pod's name) and address
// unless it is unspecified (0.0.0.0, ::).
func selfSignedCertificate(address string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "machine-controller-manager"},
		NotBefore:             now.Add(-time.Hour), // clocks differ
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host, err := os.Hostname(); err == nil && host != "" && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	if ip := net.ParseIP(address); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// fingerprint is the SHA-256 of the certificate, in hex: what a client
// that cannot verify the certificate may pin.
func fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}
