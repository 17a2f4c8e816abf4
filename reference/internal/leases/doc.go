// Package leases runs groups of controllers, each under a Lease of its
// own, as MCM's two processes each hold theirs: a group runs while this
// instance holds its lease, and only then, so that next to a running MCM
// process, or another manager, no controller runs twice.
//
// One client-go elector per group campaigns, all with one identity. The
// first group's lease is campaigned for at once, each later one's once
// this instance leads the first, or SecondaryDelay retry periods after it
// saw another holder of the first: two instances started together do not
// split the groups, and a holder of the first lease that never takes the
// second (MCM's machine-controller) does not keep this instance from
// taking it.
//
// Any term's end ends them all: a lost lease (ErrLeadershipLost), a failed
// group, or the context. Leases are released (emptied, as client-go's
// ReleaseOnCancel does) only after every group has stopped, so that no
// group ever runs in two instances at once — not even while an instance
// that lost one lease stops the rest.
//
// # Usage
//
//	id, err := leases.Identity(cfg.LeaderElectIdentity) // hostname_random when empty
//	err = leases.Run(logr.NewContext(ctx, log), leases.Config{
//		Client: core.CoordinationV1(), Namespace: ns, Identity: id,
//		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
//	}, []leases.Group{
//		{Name: "machine-controller", Lease: "machine-controller", Run: runMachineControllers},
//		{Name: "machine-controller-manager", Lease: "machine-controller-manager", Run: runTheOthers},
//	})
//	if errors.Is(err, leases.ErrLeadershipLost) { ... } // exit; a restart campaigns afresh
package leases
