// Package sim is a simulated cloud for testing machine controllers without
// one: an in-process, concurrency-safe Cloud whose Driver creates and
// deletes VMs in memory (optionally kept in a file, so that they outlive
// the process), with boot and deletion delays, quotas, fault injection,
// orphan and duplicate VMs, all on an injectable clock so that tests are
// deterministic; and a Kubelet that acts for the VMs' kubelets in a real
// target cluster.
//
// # The kubelet side
//
// Kubelet watches the Cloud's VM snapshots and, against a target cluster,
// does what kwok does for fake nodes:
//
//   - registers a Node for every Running, initialized VM, named after the
//     VM, with its provider ID, addresses, capacity, the providerSpec's
//     labels plus the well-known hostname, zone, instance-type and
//     node.gardener.cloud/machine-name labels, and its status in the same
//     request (Ready from the node's first version, as the kubelet
//     registers);
//   - renews the node's lease every KubeletOptions.LeaseRenewPeriod (by
//     default a quarter of LeaseDuration, as the kubelet), a little early at
//     random so that renewals spread out, and reports Ready (and no
//     pressure) unless a test overrides a condition with SetCondition,
//     writing an unchanged status only every StatusReportPeriod (5 minutes,
//     the kubelet's default), as a patch without a guard (the node's other
//     writers do not make it fail); StopHeartbeats silences one node;
//   - a Stopped or Terminating VM's kubelet falls silent, so
//     kube-controller-manager's node lifecycle controller marks the node
//     Unknown and taints it; the Node of a VM that is gone is deleted, as a
//     cloud controller manager would (KeepNodesOfGoneVMs turns that off);
//   - pods bound to a live node become Running and Ready; a deleted pod is
//     removed after KubeletOptions.TerminationFraction of its grace period;
//   - for CSI volumes of KubeletOptions.CSIDriver (by default
//     CSIDriverName, the driver whose volumes GetVolumeIDs reports) it
//     plays the external attacher: the VolumeAttachments
//     kube-controller-manager's attach-detach controller creates are
//     attached after AttachDelay, and deleted ones released DetachDelay
//     after their deletion began.
//
// Nodes it did not register (AnnotationSimulated with its Identity) are
// never touched, so several clouds with their kubelets can share a cluster.
// Give it the Cloud's ID as its Identity, and the kubelet of a process
// restarted with the cloud's state file carries on with the Nodes of the
// one before.
//
// # Scale
//
// The kubelet works from informer caches and a snapshot of the VMs that
// it reads again only when the cloud changed: a sync (every 250 ms) of
// 5 000 nodes where nothing is due costs about a millisecond and a few
// dozen allocations, with no API call. The API calls it finds due (lease
// renewals, changed statuses, pods, volumes) run Parallelism at a time,
// through the client it is given, whose rate limit must cover them: give
// it a client of its own (the reference manager's sim driver does, with
// --sim-kubelet-qps), because lease renewals alone are nodes /
// LeaseRenewPeriod writes per second, and a client shared with controllers
// starves them and is starved by them until nodes flap NotReady. When
// renewals fall behind by more than a quarter period for a whole period,
// it logs so, long before the nodes go Unknown. A restarted kubelet spreads
// the first renewals and reports of the nodes it finds over one period.
//
// What limits the scale is the API server: every renewal is a write. The
// default renewal every 10 s suits a few thousand nodes; beyond, renew
// less often and raise kube-controller-manager's --node-monitor-grace-period
// (default 50 s; it must exceed the renew period with margin) with it.
//
// Supported scale: one reference manager with this simulator keeps 5 000
// machines Running and their nodes Ready on a two-core machine that also
// runs the whole control plane (bench/simscale, run by make bench). There,
// all 5 000 were Running 3 min 33 s after their MachineDeployment was
// created, no node went from Ready to not Ready during the run nor in the
// two minutes after, the manager's peak RSS was 266 MiB, and 46 % of the
// two cores were busy at steady state, control plane included (an earlier
// run: 3 min 43 s, 278 MiB, 55 %). That is with leases renewed every 20 s
// (--sim-node-lease-renew-period=20s: about 280 lease writes a second),
// kube-controller-manager's --node-monitor-grace-period=90s,
// --sim-kubelet-qps=400 and the controllers' --kube-api-qps=200. At the
// default renewal every 10 s the same machine would write twice as many
// leases: there, stay below about 2 500 nodes. The figures are for a cloud
// in memory: with a state file, every change writes and syncs the whole
// file under the cloud's lock, which at 5 000 VMs takes tens of
// milliseconds a change, so that creating thousands of VMs is slower.
//
// # VMs
//
// A VM belongs to the machine whose name it was created for. Its provider
// ID is sim:///<zone>/<vm name>, where the VM name is the machine name, or
// the machine name with a numeric suffix if that ID was used before in the
// zone: provider IDs are never reused within a Cloud. The VM name is also
// its node name. Each VM gets an internal IP from 10.0.0.0/8.
//
// A VM also carries the tags of the class it was created with (ClassTags):
// the providerSpec's cluster (by default the class's namespace) and the
// class's namespace and name. They are what ListMachines goes by, as a
// real provider lists the VMs tagged with its class's cluster: orphan
// collection deletes what ListMachines returns and no Machine claims, so
// a class must never list the VMs of another class, namespace or cluster
// that share the cloud. The tags are the class's values, not its UID, so
// that a class created again under its name still finds its VMs.
//
// A VM is Provisioning for its boot delay (Options.BootDelay plus up to
// Options.BootJitter; the providerSpec's bootDelay and bootJitter replace
// them), then Running. DeleteMachine makes it Terminating for its deletion
// delay, after which it is gone. StopVM and StartVM power a VM off and on, as a crash
// and a reboot would. States follow from timestamps and the clock; the Cloud
// runs no goroutines.
//
// # The driver
//
// Cloud.Driver implements every operation of driver.Driver. The driver
// finds a machine's VMs by machine name and ignores Terminating VMs, which
// is what a real provider does with tags; only ListMachines also goes by
// the class's tags. Machines of classes that share a cloud must therefore
// have distinct names, or each would see the other's VM as a duplicate.
//
//   - CreateMachine returns the machine's VM if it has one (AlreadyExists if
//     it has another zone or instance type), else creates one: a create is
//     idempotent by machine name. It needs the secret keys userData and
//     apiToken. A create that fails creates nothing, unless a fault with
//     AfterEffect says otherwise. Exceeding Options.Quota gives
//     ResourceExhausted.
//   - GetMachineStatus returns the machine's VM; NotFound if it has none,
//     OutOfRange if it has several, and Uninitialized (with the response)
//     while a VM whose providerSpec sets requireInitialization waits for
//     InitializeMachine. Provisioning and Stopped VMs are reported like
//     Running ones.
//   - InitializeMachine marks the machine's VM initialized.
//   - DeleteMachine deletes the VM named by the machine's spec.providerID
//     and nothing else (success if that VM is already gone), or, without a
//     provider ID, the machine's VM (success if it has none, OutOfRange if
//     it has several).
//   - ListMachines lists every VM of the request's class (tagged with its
//     ClassTags) that is not Terminating, orphans and duplicates included,
//     by provider ID, and no VM of another class, namespace or cluster. A
//     class whose tags would all be empty is InvalidArgument: its VMs
//     could not be told from untagged ones.
//   - GetVolumeIDs returns the volume handles of CSI volumes of driver
//     CSIDriverName and skips the rest.
//
// Every operation first honours its context (Canceled, DeadlineExceeded),
// then injected faults, then checks its request: all errors are
// *driver.Error. Every operation except GetVolumeIDs checks the MachineClass
// (provider "sim" or empty, valid providerSpec) and the secret's apiToken
// (InvalidArgument if missing, Unauthenticated if it differs from
// Options.APIToken when that is set).
//
// With Options.Registerer, each call of a VM operation (all but
// GetVolumeIDs) counts as one request to the simulated cloud's compute API
// in driver.CloudAPI's metrics, mcm_cloud_api_requests_total,
// mcm_cloud_api_requests_failed_total and
// mcm_cloud_api_api_request_duration_seconds {provider="sim",
// service="compute"}: a request fails when the cloud refuses it, not when
// it answers that there is no VM, several, one waiting for initialization
// or one that does not match. The driver names its provider "sim"
// (driver.ProviderNamer) for driver.Instrument.
//
// # The providerSpec
//
// A sim MachineClass's providerSpec is a JSON object, ProviderSpec in Go:
//
//	{
//	  "zone": "zone-a",                           required; one of Options.Zones if set
//	  "instanceType": "small",                    required; a key of Options.InstanceTypes if set
//	  "capacity": {"cpu": "2", "memory": "8Gi"},  quantities; default: the instance type's
//	  "labels": {"pool": "blue"},                 strings
//	  "bootDelay": "30s",                         Go duration; default Options.BootDelay
//	  "bootJitter": "0s",                         Go duration; default Options.BootJitter
//	  "deleteDelay": "10s",                       Go duration; default Options.DeleteDelay
//	  "requireInitialization": true,              default false
//	  "cluster": "shoot--dev--a",                 VM tag (see ClassTags); default the class's namespace
//	  "kubeletVersion": "v1.38.0",                semantic version with a leading v; default DefaultKubeletVersion
//	  "inPlaceUpdate": {                          the node agent (see The node agent); default none
//	    "agent": true,                            run it on the VMs; default false
//	    "updateDelay": "20s",                     Go duration an update takes; default 0s; needs agent
//	    "retryDelay": "30s"                       Go duration before a failed update is retried; default 30s; needs agent
//	  }
//	}
//
// Decoding is strict. Unknown fields, values of the wrong type, bad
// quantities or durations and missing required fields give InvalidArgument,
// whose cause holds one *field.Error (k8s.io/apimachinery validation) per
// problem, with its path such as providerSpec.capacity[cpu]; find them with
// errors.As rather than by reading the message.
//
// # The node agent
//
// Agent plays, for the VMs of a Cloud, the part gardener-node-agent plays
// in MCM's in-place updates (the InPlaceUpdate strategy): it is opt-in per
// class (inPlaceUpdate.agent), and its settings, like kubeletVersion, are
// those of the class the VM was created with or last updated to (see
// VM.InPlaceUpdate, VM.KubeletVersion). It speaks the node label protocol
// of MCM v0.62.1, which a real agent implements the same way:
//
//   - It acts on its kubelet's nodes only (AnnotationSimulated equal to
//     AgentOptions.Identity), of Running VMs whose settings enable it.
//   - It starts when the node's InPlaceUpdate condition has reason
//     ReadyForUpdate and the node has no node.machine.sapcloud.io/update-result
//     label: the machine controller has cordoned and drained the node and
//     the machine is InPlaceUpdating. A node labelled failed is tried again
//     after retryDelay, whatever its condition says, as gardener-node-agent
//     retries a failed update; one labelled successful is done.
//   - The class the VM is to have is the template class of the machine's
//     MachineDeployment (machine, by the VM's machine name in the
//     namespace of its class; its controlling MachineSet; that set's
//     controlling deployment), read from the control cluster; without a
//     deployment, the set's template class; without a set, the machine's.
//   - After updateDelay, on the agent's clock (a delayed requeue, no
//     goroutine per node), it updates the VM in the cloud: its kubelet
//     reports the class's kubeletVersion at once, and the VM carries the
//     class's labels (VM.Labels; the node keeps the labels it registered
//     with, as a kubelet applies its node labels only at registration) and
//     agent settings; VM.UpdatedTo names the class. The VM keeps its
//     provider ID, address and class tags (VM.Class), by which ListMachines
//     and so orphan collection go, as the machine keeps naming its old
//     class after MCM moves it to the new set. The change is saved in the
//     state file.
//   - It then labels the node update-result=successful and removes
//     node.machine.sapcloud.io/update-failed-reason, in one merge patch of
//     those two keys, guarded by the node's resourceVersion.
//   - A failure labels the node update-result=failed with the reason in
//     update-failed-reason. Failures: a fault injected for
//     OperationInPlaceUpdate (matched by MachineName, Probability, Times as
//     any fault; its Message is the reason; with AfterEffect the VM is
//     updated and the result is failed nevertheless), a class whose
//     providerSpec is not valid for the cloud, and a class of another
//     zone, instance type or capacity, which needs a new VM. Faults
//     without an Operation are for the driver's operations and do not hit
//     the update.
//   - It never uncordons the node, never removes the candidate-for-update
//     or selected-for-update labels, and never removes its result: the
//     MachineDeployment controller does, once it has moved the machine to
//     its new set.
//
// Not found objects (a machine or class not in the cache yet) are retried
// with backoff and logged. A node that is ReadyForUpdate again although
// nothing changed (a rollback) is updated all the same, to the class it
// has: the agent always answers, where gardener-node-agent answers only
// when its configuration changed, leaving the machine to its in-place
// update timeout.
//
// # Test handle
//
// Besides the driver, Cloud offers:
//
//   - VMs, VM: snapshots of the VMs with their state and timestamps;
//   - LeakedVMs: the VMs no machine accounts for, given the machines that
//     exist (see there for the exact rule);
//   - AddVM, RemoveVM: VMs appearing or vanishing behind the driver's back
//     (orphans, duplicates, VMs deleted in a console); VMSpecFor gives the
//     VMSpec of a class's VM, which that class's ListMachines reports, and
//     ClassTagsOf the tags it carries;
//   - StopVM, StartVM: crashes and reboots;
//   - InjectFault, RemoveFault, ClearFaults, Faults: errors with a code,
//     with a probability or for the next N calls, latency spikes, lost
//     responses (AfterEffect), and calls that hang, deaf to their context,
//     until the fault is removed (Hang), per operation and machine;
//   - SetQuota: tighten or relax quotas at run time;
//   - Calls: how often each operation was called (OperationInPlaceUpdate:
//     the node agent's update attempts);
//   - Changed, NextTransition: wait for VM changes without polling;
//   - ID: the cloud's identity, kept in its state file, for
//     KubeletOptions.Identity.
//
// With a fake clock, time only moves when the test steps it: boots and
// deletions complete, and latency faults release their calls (a call stalled
// by a latency fault shows up in the fake clock's HasWaiters).
//
// # The state file
//
// With Options.StateFile the cloud outlives its process, as a real cloud
// outlives a manager that crashes: New loads the file, and every change is
// written to it (to a temporary file renamed over it, so that a process
// killed mid-write leaves the old state or the new one) before the call
// that made it returns. The file keeps the VMs with everything about them
// (tags, state, user data, addresses, kubelet version and in-place
// updates), the provider IDs and addresses handed out, so that none is
// reused, and the cloud's ID. Times in it are
// absolute: a VM that was booting or being deleted when the process died
// completes when it was due, and one due meanwhile has completed by the
// time the restarted process looks. Faults, quotas, the random source and
// call counts belong to the process and start afresh.
//
// An absent file is an empty cloud, and New creates it at once, so that a
// path that cannot be written fails New. A file that is not a sim cloud's
// state (empty, truncated, unknown fields, another version, inconsistent
// VMs) fails New with an error naming it: an empty cloud in its place
// would make every machine's VM look gone. A driver call whose change
// cannot be written returns Unavailable; the change is made nevertheless,
// as when a cloud acts but its response is lost, and the retry writes it.
// The file is read only in New, so only one process may use it at a time.
//
// # Usage
//
//	clk := clocktesting.NewFakeClock(time.Now())
//	cloud, err := sim.New(sim.Options{
//		Clock:     clk,
//		Seed:      1,
//		BootDelay: time.Minute,
//		Quota:     sim.Quota{MaxVMs: 10},
//	})
//	class := &v1alpha1.MachineClass{
//		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "shoot"},
//		Provider:     sim.ProviderName,
//		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
//	}
//	secret := &corev1.Secret{Data: map[string][]byte{
//		"userData": []byte("#cloud-config"), sim.CredentialsKey: []byte("token"),
//	}}
//
//	// Hand cloud.Driver() to the code under test, then:
//	_, _ = cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.ResourceExhausted, Times: 2})
//	clk.Step(time.Minute) // VMs finish booting
//	if leaked := cloud.LeakedVMs(machines); len(leaked) > 0 {
//		t.Errorf("leaked VMs: %v", leaked)
//	}
//
// With a target cluster, run a Kubelet beside the cloud (on the real clock:
// pod deletion times come from the API server), on a client of its own:
//
//	kubeletConfig := rest.CopyConfig(targetConfig)
//	kubeletConfig.QPS, kubeletConfig.Burst = 300, 600
//	kubeletClient, err := kubernetes.NewForConfig(kubeletConfig)
//	kubelet := sim.NewKubelet(cloud, kubeletClient, sim.KubeletOptions{})
//	go kubelet.Run(ctx)
//	kubelet.SetCondition(nodeName, corev1.NodeCondition{
//		Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
//	})
//
// For in-place updates, run an Agent beside it, with the control
// cluster's machine client and the kubelet's identity:
//
//	agent, err := sim.NewAgent(cloud, kubeletClient, machineClient, sim.AgentOptions{Identity: kubelet.Identity()})
//	go agent.Run(ctx)
//	_, _ = cloud.InjectFault(sim.Fault{Operation: sim.OperationInPlaceUpdate, MachineName: "m1",
//		Code: driver.Internal, Message: "kubelet is not healthy after in-place update"})
package sim
