package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// restConfig builds the client configuration of one cluster from a
// kubeconfig path or InCluster, with the manager's QPS, burst and user
// agent. There is no fallback: InCluster means rest.InClusterConfig, a
// path means that file.
func (c Config) restConfig(flagName, value string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	switch value {
	case InCluster, mcmInCluster:
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

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
