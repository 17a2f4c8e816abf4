//go:build linux

package compare

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcmkit/mcm/bench/internal/measure"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/reference/manager"
)

// Who made a request that passed the proxy.
const (
	// byManager: the system's controllers (MCM's two processes, or mcm's
	// controllers).
	byManager = "manager"
	// byKubelet: the simulated kubelet, which registers the Nodes; the
	// same code and user agent in both systems.
	byKubelet = "kubelet"
	// byAgent: the simulated node agent, which labels a node with the
	// result of its in-place update; it shares the kubelet's client and
	// is told apart by its field manager.
	byAgent = "agent"
)

// whoMade tells who made a request from its user agent and its field
// manager (the fieldManager query parameter of a write).
func whoMade(userAgent, fieldManager string) string {
	switch {
	case !strings.HasPrefix(userAgent, manager.SimKubeletUserAgent):
		return byManager
	case fieldManager == sim.AgentFieldManager:
		return byAgent
	}
	return byKubelet
}

// apiProxy stands between a system's processes and the API server and
// counts their requests by who made them: the API server's counters
// cannot tell a manager's writes from kube-controller-manager's or the
// simulated kubelet's. The processes talk plain HTTP to it on loopback
// and it forwards with the admin's credentials, over the same TLS
// connections a client of the API server uses, so both systems pay the
// same small detour.
type apiProxy struct {
	server     *http.Server
	kubeconfig string

	mu     sync.Mutex
	counts map[string]measure.Requests // by byManager, byKubelet or byAgent
}

// startProxy serves a proxy to the API server of cfg and writes a
// kubeconfig for it to kubeconfigPath.
func startProxy(cfg *rest.Config, kubeconfigPath string) (*apiProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg) // the admin's TLS and token
	if err != nil {
		return nil, err
	}
	p := &apiProxy{kubeconfig: kubeconfigPath, counts: map[string]measure.Requests{byManager: {}, byKubelet: {}, byAgent: {}}}
	forward := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		forward.ServeHTTP(rec, r)
		verb, resource, subresource := measure.RequestInfo(r.Method, r.Header.Get("Content-Type"), r.URL.Path, r.URL.Query().Get("watch") == "true")
		who := whoMade(r.UserAgent(), r.URL.Query().Get("fieldManager"))
		p.mu.Lock()
		p.counts[who][measure.Key(verb, resource, subresource, rec.status)]++
		p.mu.Unlock()
	})}
	go func() { _ = p.server.Serve(listener) }()

	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + listener.Addr().String()}
	kubeconfig.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kubeconfig.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kubeconfig.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*kubeconfig, kubeconfigPath); err != nil {
		_ = p.server.Close()
		return nil, err
	}
	return p, nil
}

// requests returns a copy of the counts so far of who.
func (p *apiProxy) requests(who string) measure.Requests {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := measure.Requests{}
	for k, v := range p.counts[who] {
		out[k] = v
	}
	return out
}

// close stops the proxy, cutting the watches that pass it.
func (p *apiProxy) close() { _ = p.server.Close() }

// statusRecorder remembers the status of a response; Unwrap lets the
// reverse proxy flush the watches through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
