// Package orphanvms collects orphan VMs: VMs of a MachineClass that no
// machine claims, left behind by a crash, a bug or a person.
//
// At start and every OrphanVMsPeriod (MCM's 15 minutes), the driver lists
// each MachineClass's VMs (exactly that class's, by the driver contract).
// A VM is an orphan when no machine claims it: none has its machine name
// in the class's namespace with the same, or still no, provider ID (a
// machine being created claims its VM by name), and none has its provider
// ID. An orphan is deleted through the driver only after it has looked
// orphaned across passes for OrphanGracePeriod and an uncached read
// confirms that no machine of its name claims it; never before the caches
// synced, and, with Options.Outages (the API-server outage gate), never
// while frozen nor within one period after an outage ended, so that a
// cache that is briefly wrong after a restart or an outage (MCM #657)
// cannot delete a healthy VM. Each deletion is logged with the VM,
// recorded as an event on its class and counted in
// mcm_safety_orphan_vms_deleted_total. The driver's calls run under
// deadlines (Options.DriverTimeouts, or those of a shared
// *driver.Deadlines), so a hung cloud holds no pass for long.
//
// A pass is the one key of a workqueue.Queue ("safety-orphan-vms") that
// requeues itself after the period. A failed pass (a class whose VMs
// cannot be listed, a deletion that failed) takes the queue's common
// path: logged once, counted in mcm_workqueue_reconcile_total with result
// "error" and mcm_workqueue_retries_total, and retried with backoff, never
// later than a period.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactory(machineClient, 0)
//	cf := informers.NewSharedInformerFactory(controlClient, 0)
//	c, err := orphanvms.New(machineClient, drv, orphanvms.Informers{
//		Machines: mf.Machine().V1alpha1().Machines(),
//		Classes:  mf.Machine().V1alpha1().MachineClasses(),
//		Secrets:  cf.Core().V1().Secrets(),
//	}, orphanvms.Options{Outages: gate, Registerer: reg}) // gate: an *outage.Gate
//	if err != nil {
//		return err
//	}
//	mf.Start(ctx.Done())
//	cf.Start(ctx.Done())
//	go c.Run(ctx)
package orphanvms
