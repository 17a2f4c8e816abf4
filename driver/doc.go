// Package driver is the boundary between the machine controllers and a
// cloud: a provider implements Driver, and the controllers call it to create,
// inspect and delete the VMs that back Machines.
//
// The operations, their request and response fields and the error codes are
// those of Gardener MCM's driver, so an MCM provider ports over method by
// method. What differs is how errors travel: a driver returns an *Error with
// a typed Code, and the controller reads it with CodeOf, which never looks at
// the error text.
//
// # The operations
//
// Every operation takes a context first. Stop work and return promptly when
// it is done: ContextError turns ctx.Err() into Canceled or
// DeadlineExceeded. Requests carry pointers into shared informer caches, so
// drivers must treat them as read-only; copy before changing anything.
//
// CreateMachine creates the VM for req.Machine and returns its provider ID,
// node name and addresses. It must be idempotent by machine name: the
// controller calls it again after a timeout, a crash or a lost response, and
// each call must yield the same single VM, never a second one. So tag or
// name VMs after the machine, look for an existing VM first, and return it
// (OK) if it matches the request. If it exists but cannot serve the request
// (other zone, other instance type), return AlreadyExists. A failed create
// must not leave a VM (or disk, or NIC) behind that a retry would not find.
//
// InitializeMachine is optional. Some clouds need a step after the VM
// exists (attaching network interfaces, say). The controller calls it right
// after CreateMachine, and again whenever GetMachineStatus reports
// Uninitialized. Drivers without such a step return Unimplemented, and the
// controller moves on. NotFound means the VM vanished; the controller
// records the failure and, when it retries, starts over with
// GetMachineStatus.
//
// DeleteMachine deletes the VM of req.Machine and everything created with
// it. It must be idempotent: if there is no VM (never created, or already
// deleted), return OK, not NotFound. Returning OK while the cloud still
// tears the VM down is fine. If req.Machine.Spec.ProviderID is set, delete
// that VM and no other, even if the machine has several: it names the VM
// the controller means, either the one it recorded or one it has just
// created and must discard because its node name belongs to another
// machine. If it is not set (creation started but its result was never
// recorded) and several VMs match the machine, return OutOfRange rather
// than guess.
//
// GetMachineStatus reports which VM backs req.Machine. Return NotFound if
// there is none: the controller then calls CreateMachine. Return OutOfRange
// if several VMs match, rather than pick one: the controller treats it as a
// failure and retries; only orphan collection (see ListMachines) removes
// surplus VMs.
// If the VM exists but InitializeMachine still has to run on it, return the
// filled-in response together with an Uninitialized error. Otherwise return
// OK with the provider ID, node name and addresses.
//
// ListMachines is optional. It returns the VMs created for machines of
// req.MachineClass, keyed by provider ID, with the name of the machine each
// was created for: orphans and duplicates of the class included, and no
// other VM. Identify them as a real cloud driver does, by what the class
// puts on its VMs (the cluster and role tags of its providerSpec, or the
// class's own identity), never by what the credentials can see: an account
// or project is often shared by several classes, namespaces and clusters.
// The safety controller relies on this. For each class it lists the VMs
// and deletes, through DeleteMachine, every one that no Machine claims, so
// a VM of another class, namespace or cluster in the list is a healthy VM
// deleted (MCM's issue #657 was such deletions). A driver that cannot list
// returns Unimplemented, and its orphans are not collected.
//
// GetVolumeIDs is optional. It maps persistent volume specs to the cloud's
// volume IDs, leaving out volumes that are not the cloud's, so that a drain
// waits only for the cloud's volumes to detach (and can check the Node's
// status.volumesAttached for them too). A driver that returns Unimplemented
// cannot tell its volumes from others, so the drain waits for all of the
// node's volumes to detach; a driver whose cloud has no volumes can return
// an empty list instead, and the drain then waits for none.
//
// # Optional operations
//
// The Driver interface has all six methods, and a driver reports an
// unsupported one by returning Unimplemented. Embed
// UnimplementedOptional to get that for InitializeMachine, ListMachines and
// GetVolumeIDs. We chose this over optional interfaces found by type
// assertion because wrappers (Instrument, rate limiters, fault injectors,
// the conformance kit) then cannot hide a capability by accident, a driver
// can decide support per class at run time, and MCM providers port
// unchanged.
//
// # Secrets
//
// A MachineClass references a Secret with the user data (key userData) and
// optionally a second Secret with the credentials. The driver receives one
// Secret holding both, merged by MergeSecrets with the credentials winning
// on conflicts. In the calls of the creation flow (GetMachineStatus,
// CreateMachine, InitializeMachine) the controller has already replaced
// <<MACHINE_NAME>> in the user data with the machine's name and, with a
// target cluster, <<BOOTSTRAP_TOKEN>> (plain or URL-encoded) with a
// bootstrap token "<id>.<secret>" it issued for the machine, as MCM does;
// without a target cluster <<BOOTSTRAP_TOKEN>> arrives unchanged.
// Return InvalidArgument if a key the driver needs is missing.
//
// # Error codes
//
// Return an *Error (NewError, Errorf or a struct literal) from every failed
// operation. Plain errors count as Unknown, and errors that wrap
// context.Canceled or context.DeadlineExceeded count as Canceled or
// DeadlineExceeded. Code.String returns the names MCM uses, which the
// controller writes to status.lastOperation.errorCode, where the
// cluster-autoscaler reads them (ResourceExhausted makes it try another
// node group quickly).
//
// The codes a driver should use, by situation:
//
//	InvalidArgument     providerSpec malformed or has unknown fields; a secret key is missing
//	Unauthenticated     credentials missing or rejected
//	PermissionDenied    credentials valid but not allowed
//	ResourceExhausted   quota or capacity exhausted (zone out of instances, too many VMs)
//	Unavailable         cloud API unreachable, overloaded, throttling
//	NotFound            GetMachineStatus/InitializeMachine: no VM backs the machine
//	OutOfRange          several VMs back the machine
//	Uninitialized       GetMachineStatus: VM exists, InitializeMachine must run
//	AlreadyExists       CreateMachine: a VM exists for the machine but does not match
//	Unimplemented       the operation is not supported
//	Canceled, DeadlineExceeded   the context ended
//	Aborted             lost a race (conflicting concurrent update); retry
//	Internal            a broken invariant in the driver or cloud
//	Unknown             anything else
//
// # How the machine controller reacts
//
// The machine controller (package machine) takes some codes as answers
// rather than failures:
//
//   - NotFound from GetMachineStatus: no VM backs the machine yet, so
//     CreateMachine follows. Unimplemented from GetMachineStatus is taken
//     the same way.
//   - Uninitialized from GetMachineStatus: InitializeMachine follows.
//   - Unimplemented from InitializeMachine: the step is skipped.
//   - NotFound from DeleteMachine: the VM counts as deleted, as with OK.
//   - Unimplemented from GetVolumeIDs: the drain waits for all of the
//     node's volumes to detach, not only the cloud's. Any other
//     GetVolumeIDs error fails that drain pass, which the controller
//     retries with its work queue's error backoff.
//
// Any other error of a call in the creation flow or of DeleteMachine is a
// failure. The controller writes the code's name to the Machine's
// status.lastOperation.errorCode, where the cluster-autoscaler looks for
// ResourceExhausted, and tries the machine again after a wait that depends
// on the code only (the periods are machine.Options fields, shown with
// their defaults):
//
//	Unavailable, DeadlineExceeded, Aborted,
//	Unknown, Canceled, Uninitialized           ShortRetry (5s)
//	ResourceExhausted                          ResourceExhaustedRetry (LongRetry, 10m)
//	every other code                           MediumRetry (3m)
//
// Each consecutive failure of one machine doubles its wait, up to
// MaxRetryDelay (30m), so no code leads to a tight retry loop; a sync that
// ends without a failure starts the count again. No code is set apart as
// needing a person: InvalidArgument or Unauthenticated wait MediumRetry
// like the rest, but a change of the machine's class, or of a secret the
// class references, queues the machine again at once.
//
// # Deadlines
//
// MCM calls its driver without a deadline, so a cloud call that never
// returns holds its worker for good. WithDeadlines wraps a Driver so that
// every call has one, by operation (Timeouts; the zero value is the
// Default*Timeout constants: 10 minutes for CreateMachine,
// InitializeMachine and DeleteMachine, 2 for GetMachineStatus, 5 for
// ListMachines, 1 for GetVolumeIDs). The call's context ends at the
// deadline and the caller gets DeadlineExceeded then, whether the driver
// returns or not. A driver that ignores its context is abandoned: its call
// runs on in the background, its result dropped, and until it returns no
// other call for that machine is started (each fails at once with
// DeadlineExceeded), so the contract that a machine never has two calls at
// once holds and a second CreateMachine cannot make a second VM. Stuck
// lists those calls, with their machine and start; the reference manager's
// /readyz names them. The machine controller wraps its driver itself
// (machine.Options.DriverTimeouts) unless it gets a *Deadlines to share.
//
// # Metrics
//
// Instrument wraps a Driver and records per-operation latency and failures
// by error code on a prometheus.Registerer you pass, under MCM's metric
// names and labels: mcm_cloud_api_driver_request_duration_seconds
// {provider,operation} and mcm_cloud_api_driver_requests_failed_total
// {provider,operation,error_code}. provider is the MachineClass's provider
// field, else the name a driver gives as a ProviderNamer. The machine
// controller instruments its driver itself when given a Registerer.
//
// A provider counts its own requests to its cloud's API with CloudAPI:
// mcm_cloud_api_requests_total and mcm_cloud_api_requests_failed_total
// {provider,service}, and mcm_cloud_api_api_request_duration_seconds
// {provider,service} of the successful ones, as MCM's provider code does.
// Nothing is registered on the global registry.
//
// # Testing a driver
//
// Package driver/drivertest checks a Driver against this contract: put
// drivertest.Run in a test of your provider. Package driver/sim is a
// simulated cloud, with fault injection, for testing controllers.
//
// # Usage
//
// A provider implements the three required operations and embeds
// UnimplementedOptional for the others:
//
//	type Driver struct {
//		driver.UnimplementedOptional
//		api *cloud.Client
//	}
//
//	func (d *Driver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
//		spec, err := decodeSpec(req.MachineClass.ProviderSpec)
//		if err != nil {
//			return nil, driver.Errorf(driver.InvalidArgument, "providerSpec: %w", err)
//		}
//		if vm, err := d.api.FindByTag(ctx, "machine", req.Machine.Name); err == nil {
//			return &driver.CreateMachineResponse{ProviderID: vm.ID, NodeName: vm.Hostname}, nil // idempotent
//		} else if !cloud.IsNotFound(err) {
//			return nil, driver.Errorf(driver.Unavailable, "look up VM: %w", err)
//		}
//		vm, err := d.api.Run(ctx, spec, req.Secret.Data[v1alpha1.UserDataKey], "machine", req.Machine.Name)
//		switch {
//		case cloud.IsQuotaExceeded(err):
//			return nil, driver.Errorf(driver.ResourceExhausted, "run instance: %w", err)
//		case err != nil:
//			return nil, driver.Errorf(driver.Unavailable, "run instance: %w", err)
//		}
//		return &driver.CreateMachineResponse{ProviderID: vm.ID, NodeName: vm.Hostname}, nil
//	}
//
// and the program that runs the controllers instruments it:
//
//	d, err := driver.Instrument(&provider.Driver{...}, registry)
//
// The controller side reads the code of an error:
//
//	resp, err := d.GetMachineStatus(ctx, req)
//	switch driver.CodeOf(err) {
//	case driver.OK:
//		// adopt resp.ProviderID
//	case driver.NotFound:
//		// create the VM
//	case driver.Uninitialized:
//		// call InitializeMachine; resp is filled in
//	default:
//		// record driver.CodeOf(err).String() in lastOperation.errorCode,
//		// requeue after the wait chosen for that code (see above)
//	}
package driver
