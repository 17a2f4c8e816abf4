package manager

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/reference/internal/listwatch"
)

// loadKubeconfigs loads the clusters' client configurations; targetCfg is
// nil without a target cluster.
func (m *Manager) loadKubeconfigs() (controlCfg, targetCfg *rest.Config, err error) {
	m.state.setWaiting("loading kubeconfigs")
	controlCfg, err = restConfig(m.cfg, "control-kubeconfig", m.cfg.ControlKubeconfig)
	if err != nil {
		return nil, nil, err
	}
	switch m.cfg.TargetKubeconfig {
	case NoTarget:
	case m.cfg.ControlKubeconfig:
		targetCfg = rest.CopyConfig(controlCfg)
	default:
		if targetCfg, err = restConfig(m.cfg, "target-kubeconfig", m.cfg.TargetKubeconfig); err != nil {
			return nil, nil, err
		}
	}
	return controlCfg, targetCfg, nil
}

// waitForClusters waits for the API servers and the machine CRDs, and
// returns the selected controllers that can run, and those skipped with
// the resources they lack.
func (m *Manager) waitForClusters(ctx context.Context, controlCfg, targetCfg *rest.Config) (runnable []string, skipped map[string][]string, err error) {
	log := m.log
	if err := waitForAPIServer(ctx, log, "control", controlCfg, m.state.setWaiting); err != nil {
		return nil, nil, err
	}
	if targetCfg != nil && m.cfg.TargetKubeconfig != m.cfg.ControlKubeconfig {
		if err := waitForAPIServer(ctx, log, "target", targetCfg, m.state.setWaiting); err != nil {
			return nil, nil, err
		}
	}
	served, err := servedMachineResources(ctx, log, controlCfg, m.state.setWaiting)
	if err != nil {
		return nil, nil, err
	}
	runnable, skipped = m.runnableControllers(served)
	for name, missing := range skipped {
		log.Info("Skipping controller: the CRDs it needs are not served; install them and restart to run it",
			"controller", name, "missing", missing)
	}
	if len(runnable) == 0 {
		return nil, nil, fmt.Errorf("none of the selected controllers can run: their CRDs are not served (%v)", skipped)
	}
	return runnable, skipped, nil
}

// runnableControllers splits the selected controllers into those whose
// resources are served and those (with the missing resources) that are not.
func (m *Manager) runnableControllers(served []string) (runnable []string, skipped map[string][]string) {
	selected, _ := selectedControllers(m.cfg, m.opts.Controllers) // validated in New
	skipped = map[string][]string{}
	for _, name := range selected {
		var missing []string
		for _, r := range m.opts.Controllers[name].Resources {
			if !slices.Contains(served, r) {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			skipped[name] = missing
		} else {
			runnable = append(runnable, name)
		}
	}
	return runnable, skipped
}

// startDriver builds the driver of --driver into cc, behind the deadlines
// of --driver-timeouts, and starts its background work. stop ends that
// work, once the controllers have stopped: it outlives them.
func (m *Manager) startDriver(ctx context.Context, cc *ControllerContext, targetCfg *rest.Config) (stop func(), err error) {
	// The driver's own clients (the sim's kubelet) recover from an outage
	// as fast as the controllers' do, but /readyz is about the
	// controllers' informers only.
	driverTarget := targetCfg
	if driverTarget != nil {
		driverTarget = listwatch.Transport(driverTarget, nil, "")
	}
	d, background, err := m.opts.Drivers[m.cfg.Driver](ctx, DriverEnv{
		Config: m.cfg, Target: cc.TargetCore, TargetConfig: driverTarget, Machines: cc.Machines,
		Logger: m.log.WithName("driver"), Registerer: m.reg,
	})
	if err != nil {
		return nil, fmt.Errorf("--driver=%s: %w", m.cfg.Driver, err)
	}
	// One set of deadlines for every controller that calls the driver, so
	// that no machine gets a call while another controller's call for it
	// is stuck, and /readyz sees them all.
	deadlines, err := driver.WithDeadlines(d, m.cfg.DriverTimeouts)
	if err != nil {
		return nil, fmt.Errorf("--driver=%s: %w", m.cfg.Driver, err)
	}
	cc.Driver = deadlines
	m.state.update(func(s *state) { s.driverCalls = deadlines })
	if background == nil {
		return func() {}, nil
	}
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- background(bgCtx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			m.log.Error(err, "Driver background work failed")
		}
	}, nil
}
