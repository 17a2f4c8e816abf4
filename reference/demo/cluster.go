package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/controlplane"
	"github.com/mcmkit/mcm/reference/manager"
)

// startControlPlane builds the binaries (cached) and starts a cluster with
// the CRDs installed.
func (d *demo) startControlPlane(ctx context.Context) (*controlplane.Cluster, error) {
	if _, err := os.Stat("hack/testenv.sh"); err == nil {
		d.printf("Building the test environment binaries (once; cached afterwards)...\n")
		cmd := exec.CommandContext(ctx, "./hack/testenv.sh")
		cmd.Stdout, cmd.Stderr = d.out, d.out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("hack/testenv.sh: %w", err)
		}
	}
	bin, err := controlplane.BinDir()
	if err != nil {
		return nil, err
	}
	d.kubectl = filepath.Join(bin, "kubectl")
	d.printf("Starting a local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)...\n")
	start := time.Now()
	env, err := controlplane.Start(ctx, "demo", controlplane.Options{}, crds.Install)
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	d.printf("Control plane up in %v, machine CRDs installed; files in %s\n", time.Since(start).Round(100*time.Millisecond), env.Dir())
	return env, nil
}

// connect builds the clients of the cluster the manager controls, from
// the same kubeconfig, so that the demo sees what the manager sees.
func (d *demo) connect() error {
	var (
		cfg *rest.Config
		err error
	)
	switch d.cfg.ControlKubeconfig {
	case manager.InCluster, "inClusterConfig": // MCM's spelling, accepted by the manager
		cfg, err = rest.InClusterConfig()
	default:
		cfg, err = clientcmd.BuildConfigFromFlags("", d.cfg.ControlKubeconfig)
	}
	if err != nil {
		return fmt.Errorf("loading %s: %w", d.cfg.ControlKubeconfig, err)
	}
	d.restCfg = cfg
	if d.machines, err = versioned.NewForConfig(cfg); err != nil {
		return err
	}
	d.core, err = kubernetes.NewForConfig(cfg)
	return err
}
