package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/reference/internal/flags"
	"github.com/mcmkit/mcm/reference/internal/listwatch"
	"github.com/mcmkit/mcm/reference/internal/restmetrics"
)

// restConfig builds the client configuration of one cluster from a
// kubeconfig path or InCluster, with the manager's QPS, burst and user
// agent. There is no fallback: InCluster means rest.InClusterConfig, a
// path means that file.
func restConfig(c Config, flagName, value string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	switch value {
	case InCluster, flags.MCMInCluster:
		cfg, err = rest.InClusterConfig()
	default:
		var raw *clientcmdapi.Config
		raw, err = clientcmd.LoadFromFile(value)
		if err == nil {
			cfg, err = clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--%s=%s: %w", flagName, value, err)
	}
	cfg.QPS = float32(c.KubeAPIQPS)
	cfg.Burst = c.KubeAPIBurst
	cfg.UserAgent = "mcm-reference"
	return cfg, nil
}

// clients builds the clients and the event recorder; cleanup stops the
// event broadcaster.
func (m *Manager) clients(ctx context.Context, controlCfg, targetCfg *rest.Config) (ControllerContext, func(), error) {
	cc := ControllerContext{Config: m.cfg, Registerer: m.reg, Logger: m.log}
	restMetrics, err := restmetrics.New(m.reg)
	if err != nil {
		return cc, nil, fmt.Errorf("REST client metrics: %w", err)
	}
	// Measured inside the list-watch retries, so that each attempt counts.
	controlCfg = listwatch.Transport(restMetrics.Instrument(controlCfg), m.listWatch, "control")
	if targetCfg != nil {
		targetCfg = listwatch.Transport(restMetrics.Instrument(targetCfg), m.listWatch, "target")
	}
	cc.controlCfg, cc.targetCfg = controlCfg, targetCfg
	if cc, err = cc.withOwnClients(); err != nil {
		return cc, nil, err
	}
	scheme := runtime.NewScheme()
	if err := kscheme.AddToScheme(scheme); err != nil {
		return cc, nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return cc, nil, err
	}
	// The broadcaster outlives ctx: the lease release at shutdown records an
	// event. cleanup stops it.
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cc.ControlCore.CoreV1().Events("")})
	cc.Recorder = broadcaster.NewRecorder(scheme, corev1.EventSource{Component: eventSource})
	return cc, broadcaster.Shutdown, nil
}

// withOwnClients returns cc with clients of its own: each client of
// client-go has its own rate limiter, so the controllers given these
// clients get a budget of --kube-api-qps and --kube-api-burst per cluster
// and API of their own (see runControllers).
func (cc ControllerContext) withOwnClients() (ControllerContext, error) {
	if cc.controlCfg == nil {
		return cc, nil // clients given as they are (tests with fakes)
	}
	var err error
	if cc.Machines, err = versioned.NewForConfig(withContentType(cc.controlCfg, runtime.ContentTypeJSON)); err != nil {
		return cc, fmt.Errorf("control cluster client: %w", err)
	}
	if cc.ControlCore, err = kubernetes.NewForConfig(withContentType(cc.controlCfg, cc.Config.KubeAPIContentType)); err != nil {
		return cc, fmt.Errorf("control cluster client: %w", err)
	}
	if cc.targetCfg != nil {
		if cc.TargetCore, err = kubernetes.NewForConfig(withContentType(cc.targetCfg, cc.Config.KubeAPIContentType)); err != nil {
			return cc, fmt.Errorf("target cluster client: %w", err)
		}
	}
	return cc, nil
}

// withContentType returns a copy of cfg whose requests carry contentType
// and which accepts it, and JSON, in answers: the API server answers in
// JSON what it has no protobuf for (custom resources, some errors).
func withContentType(cfg *rest.Config, contentType string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = contentType
	if contentType != runtime.ContentTypeJSON {
		cfg.AcceptContentTypes += "," + runtime.ContentTypeJSON
	}
	return cfg
}

// waitForAPIServer polls the API server's /readyz until it answers ok,
// logging why it is not yet usable, with backoff up to 10s between tries.
// It returns only when the server is ready or ctx ends: a control plane that
// comes up after the manager (a fresh cluster, a restarting seed) is normal.
func waitForAPIServer(ctx context.Context, log logr.Logger, which string, cfg *rest.Config, status func(string)) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s cluster client: %w", which, err)
	}
	return retry(ctx, func(ctx context.Context) (bool, string) {
		body, err := dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		if err != nil {
			return false, fmt.Sprintf("%s API server %s is not ready: %v", which, cfg.Host, oneLine(err.Error()))
		}
		if strings.TrimSpace(string(body)) != "ok" {
			return false, fmt.Sprintf("%s API server %s is not ready: %s", which, cfg.Host, oneLine(string(body)))
		}
		return true, ""
	}, log, status)
}

// servedMachineResources waits until machine.sapcloud.io/v1alpha1 serves
// at least baseResources, then returns every resource it serves.
func servedMachineResources(ctx context.Context, log logr.Logger, cfg *rest.Config, status func(string)) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("control cluster client: %w", err)
	}
	gv := v1alpha1.SchemeGroupVersion.String()
	var served []string
	err = retry(ctx, func(ctx context.Context) (bool, string) {
		list, err := dc.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("the control cluster does not serve %s: install the machine CRDs (api/crds, e.g. kubectl apply -f api/crds/)", gv)
		}
		if err != nil {
			return false, fmt.Sprintf("discovering %s: %v", gv, oneLine(err.Error()))
		}
		served = served[:0]
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				served = append(served, r.Name)
			}
		}
		var missing []string
		for _, r := range baseResources {
			if !slices.Contains(served, r) {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			return false, fmt.Sprintf("the control cluster serves %s without %s: install the machine CRDs", gv, strings.Join(missing, ", "))
		}
		return true, ""
	}, log, status)
	slices.Sort(served)
	return served, err
}

// retry calls try until it succeeds or ctx ends, logging its reason and
// passing it to status on every failure, waiting 1s, 2s, 4s, ... up to 10s.
func retry(ctx context.Context, try func(context.Context) (bool, string), log logr.Logger, status func(string)) error {
	delay := time.Second
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, why := try(callCtx)
		cancel()
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		status(why)
		log.Info("Waiting; will retry", "reason", why, "attempt", attempt, "retryIn", delay)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}
