package controlplane

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceCIDR is the cluster-internal service range the API server
// allocates from. No traffic is ever sent to it: nothing in the environment
// runs a proxy, so it is bookkeeping only.
const serviceCIDR = "10.96.0.0/24"

// cluster is one running control plane.
type cluster struct {
	name       string
	dir        string // temp dir with data, certs, kubeconfig and logs
	logDir     string
	kubeconfig string
	config     *rest.Config
	procs      processGroup

	// apiserver and startAPIServer let a test stop the API server and
	// start it again with the same flags (outage.go).
	apiserver      *process
	startAPIServer func(context.Context) (*process, error)
	// kcm and startKCM restart kube-controller-manager after an outage.
	kcm      *process
	startKCM func(context.Context) (*process, error)
}

// startCluster starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler from binDir and waits until all four are healthy and the
// controller manager is doing work. On error everything started is stopped
// and the returned cluster (non-nil when the temp dir exists) still carries
// the logs for diagnosis.
//
// The ports are free when they are picked but taken only when the
// components bind them, and control planes of other test packages start at
// the same time: a component that lost its port to one of them exits, and
// the cluster is started again on new ports, a few times at most.
func startCluster(ctx context.Context, name, binDir string, opts Options) (*cluster, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		dir, err := os.MkdirTemp("", "mcm-testenv-"+name+"-")
		if err != nil {
			return nil, fmt.Errorf("creating temp dir: %w", err)
		}
		c := &cluster{name: name, dir: dir, logDir: filepath.Join(dir, "logs")}
		err = c.start(ctx, binDir, opts)
		if err == nil {
			return c, nil
		}
		c.procs.stopAll(5 * time.Second)
		if attempt == attempts || !c.procs.lostPort() {
			return c, err
		}
		_ = os.RemoveAll(dir)
	}
}

// ports are the loopback ports of one cluster's components.
type ports struct {
	etcdClient, etcdPeer, api, kcm, sched int
}

// start brings the components up in order, each step waiting for what the
// next one needs: keys and credentials, etcd, the API server, then the
// controller manager and the scheduler, and last proof that the
// controllers work.
func (c *cluster) start(ctx context.Context, binDir string, opts Options) error {
	for _, d := range []string{c.logDir, filepath.Join(c.dir, "pki"), filepath.Join(c.dir, "etcd")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	keys, err := newPKI(filepath.Join(c.dir, "pki"))
	if err != nil {
		return err
	}
	free, err := freePorts(5)
	if err != nil {
		return err
	}
	p := ports{etcdClient: free[0], etcdPeer: free[1], api: free[2], kcm: free[3], sched: free[4]}
	tokenPath, err := c.writeIdentities(p.api, keys)
	if err != nil {
		return err
	}
	if err := c.startEtcd(ctx, binDir, p); err != nil {
		return err
	}
	if err := c.startFirstAPIServer(ctx, binDir, p, keys, tokenPath); err != nil {
		return err
	}
	kcm, err := c.startControllerManager(binDir, p.kcm, keys, opts)
	if err != nil {
		return err
	}
	sched, err := c.run(binDir, "kube-scheduler", c.componentFlags("scheduler", p.sched)...)
	if err != nil {
		return err
	}
	return c.waitWorking(ctx, p, kcm, sched)
}

// writeIdentities gives every component its own static token and
// kubeconfig, and sets the cluster's admin kubeconfig and client
// configuration. The admin user is in system:masters, the components get
// their usual identities so that RBAC works as in a real cluster. It
// returns the API server's token file.
func (c *cluster) writeIdentities(apiPort int, keys *pki) (string, error) {
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	identities := []struct{ user, groups, kubeconfig string }{
		{"admin", "system:masters", "admin.kubeconfig"},
		{"system:kube-controller-manager", "", "controller-manager.kubeconfig"},
		{"system:kube-scheduler", "", "scheduler.kubeconfig"},
	}
	var adminToken string
	var tokenFile strings.Builder
	for _, id := range identities {
		tok, err := randomToken()
		if err != nil {
			return "", err
		}
		if id.user == "admin" {
			adminToken = tok
		}
		fmt.Fprintf(&tokenFile, "%s,%s,%s,%q\n", tok, id.user, id.user, id.groups)
		if err := writeKubeconfig(filepath.Join(c.dir, id.kubeconfig), server, keys.caPEM, tok); err != nil {
			return "", err
		}
	}
	tokenPath := filepath.Join(c.dir, "pki", "tokens.csv")
	if err := os.WriteFile(tokenPath, []byte(tokenFile.String()), 0o600); err != nil {
		return "", fmt.Errorf("writing token file: %w", err)
	}
	c.kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	c.config = &rest.Config{
		Host:            server,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: keys.caPEM},
		// Tests create many objects; client-go's default of 5 QPS would make
		// them measure the client's rate limiter.
		QPS:   200,
		Burst: 400,
	}
	return tokenPath, nil
}

// startEtcd starts etcd and waits until it is healthy.
func (c *cluster) startEtcd(ctx context.Context, binDir string, p ports) error {
	client := "http://127.0.0.1:" + strconv.Itoa(p.etcdClient)
	peer := "http://127.0.0.1:" + strconv.Itoa(p.etcdPeer)
	etcd, err := c.run(binDir, "etcd",
		"--name=testenv",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=testenv="+peer,
		// Test data is thrown away: durability only costs time.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	return waitHealthy(ctx, etcd, client+"/health", nil)
}

// startFirstAPIServer sets c.startAPIServer up, so that an outage can
// start the API server again with the same flags (outage.go), and starts
// it.
func (c *cluster) startFirstAPIServer(ctx context.Context, binDir string, p ports, keys *pki, tokenPath string) error {
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(p.etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The endpoint reconciler refuses loopback addresses, and nothing
		// here reaches the API server through the kubernetes service.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(p.api),
		"--cert-dir=" + filepath.Join(c.dir, "pki"),
		"--tls-cert-file=" + keys.servingCert,
		"--tls-private-key-file=" + keys.servingKey,
		"--client-ca-file=" + keys.caCert,
		"--token-auth-file=" + tokenPath,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.saPub,
		"--service-account-signing-key-file=" + keys.saKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
	}
	c.startAPIServer = func(ctx context.Context) (*process, error) {
		p, err := c.run(binDir, "kube-apiserver", args...)
		if err != nil {
			return nil, err
		}
		return p, waitHealthy(ctx, p, c.config.Host+"/readyz", c.config)
	}
	var err error
	c.apiserver, err = c.startAPIServer(ctx)
	return err
}

// startControllerManager sets c.startKCM up, so that a test can restart
// kube-controller-manager after an outage (outage.go), and starts it
// without waiting: the scheduler starts meanwhile, and waitWorking waits
// for both.
func (c *cluster) startControllerManager(binDir string, port int, keys *pki, opts Options) (*process, error) {
	args := append(c.componentFlags("controller-manager", port),
		"--controllers=*",
		// Each controller gets its own service account, as in production
		// clusters, so RBAC gaps show up here rather than in a user's cluster.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+keys.saKey,
		"--root-ca-file="+keys.caCert,
		"--cluster-signing-cert-file="+keys.caCert,
		"--cluster-signing-key-file="+keys.caKey,
		"--service-cluster-ip-range="+serviceCIDR,
		// React to node and pod changes at test speed.
		"--concurrent-gc-syncs=5",
		"--node-monitor-period=2s",
		"--node-monitor-grace-period="+cmp.Or(opts.NodeMonitorGracePeriod, defaultNodeMonitorGracePeriod).String(),
	)
	healthz := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	c.startKCM = func(ctx context.Context) (*process, error) {
		p, err := c.run(binDir, "kube-controller-manager", args...)
		if err != nil {
			return nil, err
		}
		return p, waitHealthy(ctx, p, healthz, insecureLocal)
	}
	kcm, err := c.run(binDir, "kube-controller-manager", args...)
	if err != nil {
		return nil, err
	}
	c.kcm = kcm
	return kcm, nil
}

// waitWorking waits until kube-controller-manager and kube-scheduler are
// healthy and the controllers do work.
func (c *cluster) waitWorking(ctx context.Context, p ports, kcm, sched *process) error {
	// /healthz of both is open to anonymous callers on their self-signed
	// serving certificates.
	if err := waitHealthy(ctx, kcm, "https://127.0.0.1:"+strconv.Itoa(p.kcm)+"/healthz", insecureLocal); err != nil {
		return err
	}
	if err := waitHealthy(ctx, sched, "https://127.0.0.1:"+strconv.Itoa(p.sched)+"/healthz", insecureLocal); err != nil {
		return err
	}
	// Healthy is not the same as working: the service-account controller
	// creating "default" in the default namespace shows the controllers run.
	client, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := waitForServiceAccount(ctx, client, metav1.NamespaceDefault, kcm); err != nil {
		return fmt.Errorf("kube-controller-manager never created the default service account: %w", err)
	}
	return nil
}

// run starts binDir/name as a component of the cluster.
func (c *cluster) run(binDir, name string, args ...string) (*process, error) {
	p, err := startProcess(name, filepath.Join(binDir, name), c.logDir, args...)
	if err != nil {
		return nil, err
	}
	c.procs.add(p)
	return p, nil
}

// componentFlags are the flags kube-controller-manager and kube-scheduler
// share: their kubeconfig (also for delegated authentication and
// authorization), a loopback serving port with self-signed certificates,
// and no leader election.
func (c *cluster) componentFlags(name string, port int) []string {
	kubeconfig := filepath.Join(c.dir, name+".kubeconfig")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.dir, "pki", name),
		"--leader-elect=false",
	}
}

// insecureLocal marks a health check against a component's self-signed
// certificate on the loopback interface.
var insecureLocal = &rest.Config{TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

// waitHealthy polls url until it answers 200, the process exits or ctx ends.
// With cfg the request carries cfg's CA and credentials.
func waitHealthy(ctx context.Context, p *process, url string, cfg *rest.Config) error {
	transport := http.DefaultTransport
	if cfg != nil {
		var err error
		if transport, err = rest.TransportFor(cfg); err != nil {
			return fmt.Errorf("transport for %s: %w", p.name, err)
		}
	}
	httpClient := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if ended, err := p.exited(); ended {
			return false, fmt.Errorf("%s %w", p.name, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s at %s (last: %s): %w", p.name, url, last, err)
	}
	return nil
}

// waitForServiceAccount waits until the service-account controller created
// the default account in ns; pods cannot be created there before. When
// kcm, which creates it, is given, it fails at once if kcm has ended: at
// start-up its healthz may have been answered by another process that
// holds its port.
func waitForServiceAccount(ctx context.Context, client kubernetes.Interface, ns string, kcm *process) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if kcm != nil {
			if ended, err := kcm.exited(); ended {
				return false, fmt.Errorf("%s %w", kcm.name, err)
			}
		}
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		// Other errors are transient while the server settles.
		return err == nil, nil
	})
}

// freePorts reserves n distinct loopback ports. They are released before the
// components bind them; a collision in between shows up as a component
// exiting, which start reports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserving a port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func writeKubeconfig(path, server string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "user"}
	cfg.CurrentContext = "testenv"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

// stop ends all components and removes the temp dir unless keep is set.
func (c *cluster) stop(keep bool) error {
	c.procs.stopAll(10 * time.Second)
	if keep {
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", c.dir, err)
	}
	return nil
}

// tails returns the last lines each component logged since marks.
func (c *cluster) tails(marks map[string]int64, maxLines int) string {
	var b strings.Builder
	for _, p := range c.procs.all() {
		fmt.Fprintf(&b, "----- %s (%s), last lines -----\n%s\n", p.name, p.logPath, p.tailSince(marks[p.name], maxLines))
	}
	return b.String()
}

func (c *cluster) logMarks() map[string]int64 {
	marks := map[string]int64{}
	for _, p := range c.procs.all() {
		marks[p.name] = p.logSize()
	}
	return marks
}
