package cli

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/client/clientset/versioned"
)

// clients reach the control cluster (machines) and the target cluster
// (nodes, pods) in the namespace the flags and kubeconfig chose.
type clients struct {
	namespace string
	machines  versioned.Interface
	control   kubernetes.Interface
	target    kubernetes.Interface
}

// userAgent names the plugin in the API servers' audit logs.
const userAgent = "kubectl-mcm"

// connect loads the kubeconfig as kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, with --context and --namespace on top.
func (g *globals) connect() (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: g.context}
	overrides.Context.Namespace = g.namespace
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("the namespace of the kubeconfig's context: %w", err)
	}
	c := &clients{namespace: ns}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), userAgent)
	if c.machines, err = versioned.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("the machine client: %w", err)
	}
	if c.control, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("the control cluster's client: %w", err)
	}
	c.target = c.control
	if g.targetKubeconfig != "" {
		tcfg, err := clientcmd.BuildConfigFromFlags("", g.targetKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --target-kubeconfig: %w", err)
		}
		if c.target, err = kubernetes.NewForConfig(rest.AddUserAgent(tcfg, userAgent)); err != nil {
			return nil, fmt.Errorf("the target cluster's client: %w", err)
		}
	}
	return c, nil
}
