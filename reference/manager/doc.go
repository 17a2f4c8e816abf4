// Package manager is the reference machine-controller-manager as a
// library: flags, configuration checks, clients, the wait for the API
// servers and the machine CRDs, leader election, the HTTP server for
// metrics and health, the controller table and the driver registry. The
// reference binary (package reference) is one call to Main; a provider's
// own binary is the same call with its driver added to the registry.
//
// # Flags
//
// Every flag of MCM's two processes (machine-controller-manager and a
// provider's machine-controller, v0.62.1) is accepted, with MCM's type and
// default, so that their command lines work unchanged; MCM's spellings too
// (--machine_drain_timeout, -v3). Those that work as in MCM:
// --control-kubeconfig, --target-kubeconfig, --namespace (default),
// --concurrent-syncs (50, the machine-controller's), --kube-api-qps (20),
// --kube-api-burst (30), --kube-api-content-type (protobuf, for the
// clients of Kubernetes' own types; machine.sapcloud.io is always JSON),
// --machine-creation-timeout (20m), --machine-health-timeout (10m),
// --machine-preserve-timeout (96h), --machine-inplace-update-timeout (20m),
// --machine-drain-timeout (2h), --machine-max-evict-retries (360),
// --machine-pv-detach-timeout (2m), --machine-pv-reattach-timeout (90s; a
// drained pod's volumes are waited for until attached elsewhere, 0 skips
// the wait), --resource-exhausted-retry (10m), --node-conditions,
// --bootstrap-token-auth-extra-groups, --safety-up (2), --safety-down (1),
// --machine-safety-overshooting-period (1m),
// --machine-safety-orphan-vms-period (15m),
// --machine-safety-apiserver-statuscheck-period (1m) and -timeout (30s),
// --autoscaler-scaledown-annotation-during-rollout (true), --leader-elect
// (true), --leader-elect-lease-duration (15s), --leader-elect-renew-deadline
// (10s), --leader-elect-retry-period (2s), --leader-elect-resource-lock
// (leases, the only kind client-go still has; any other is refused),
// --address (0.0.0.0, an IP), --port (10258; 0 serves nothing),
// --profiling, --contention-profiling (with --profiling), -v.
//
// MCM's flags that mean nothing here are accepted and, when given, named
// in one warning line at start-up (Config.IgnoredFlags): --cloud-provider
// and --controller-start-interval (MCM reads neither), --min-resync-period
// (informers here never resync),
// --log-flush-frequency and --vmodule (the log is unbuffered and has one
// verbosity). -h lists them apart. A value MCM refuses (a negative
// duration, a malformed --vmodule) is refused here too.
//
// Ours: --controllers (names from the controller table, or *), --driver (a
// driver registry entry), --leader-elect-resource-namespace (--namespace,
// where MCM keeps its leases), --leader-elect-resource-name
// (machine-controller-manager) and
// --leader-elect-machine-controller-resource-name (machine-controller): the
// leases of the two groups (see Leader election), and additions to MCM's
// safety (--machine-max-unhealthy, --machine-safety-orphan-vms-grace-period,
// --machine-max-replicas: the most machines a MachineSet or MachineDeployment
// runs, 10000 by default; --machine-keep-preserved-on-scale-down: a
// scale-down stops short of preserved machines;
// --inplace-critical-components-taint, true by default as MCM always
// taints: a node whose in-place update is done is tainted
// node.gardener.cloud/critical-components-not-ready:NoSchedule) and to the
// sim driver (--sim-*).
// --driver-timeouts sets the deadlines of driver calls, by operation
// (driver.Timeouts: CreateMachine, InitializeMachine and DeleteMachine
// 10m, GetMachineStatus 2m, ListMachines 5m, GetVolumeIDs 1m, where MCM
// has none), for the machine and safety controllers alike;
// --concurrent-creations (four fifths of --concurrent-syncs) is how many
// machine workers may create machines at once, so that creations hung in
// the cloud leave the others to deletions and health checks
// (machine.Options.MaxConcurrentCreations).
//
// Both kubeconfig flags are required, and mean exactly what they say: a
// kubeconfig path, "in-cluster" (rest.InClusterConfig; MCM's
// "inClusterConfig" also works) or, for the target, "none" (no target
// cluster: no Nodes and no drain; machines become Available). Nothing
// falls back to $KUBECONFIG or the service account silently.
//
// Bad flags are reported in one line that names each offending flag:
// unknown flags and controllers, a kubeconfig path that does not exist,
// negative timeouts, leader election timings client-go would reject, and
// contradictions (--profiling with --port=0). Main then exits with code 2.
// --leader-elect-* flags given with --leader-elect=false are accepted, as
// MCM accepts them, and named in the start-up warning of ignored flags.
//
// # Startup
//
// Run serves HTTP first, then waits for the control (and target) API
// server's /readyz and for machine.sapcloud.io/v1alpha1 to serve machines
// and machineclasses. It never gives up: it logs why it waits and retries
// with backoff up to 10s, and /readyz shows the reason. Controllers whose
// other resources are not served (say, machinesets for a MachineSet
// controller) are skipped with a warning naming the missing CRDs, and
// /readyz lists them; the others run.
//
// # Leader election
//
// The controllers run in two groups, as in MCM's two processes, each under
// the lease that process holds, in --leader-elect-resource-namespace:
//
//   - MachineControllerGroup, lease machine-controller
//     (--leader-elect-machine-controller-resource-name): the machine
//     controller, and the safety controller ("safety": the check of the
//     API-server outage gate, the orphan VM collection, the marking of
//     nodes no machine claims) — what MCM's provider machine-controller
//     runs;
//   - MachineControllerManagerGroup, lease machine-controller-manager
//     (--leader-elect-resource-name): the MachineSet and MachineDeployment
//     controllers, and the overshoot check ("overshoot", package
//     safety/overshoot) — what MCM's machine-controller-manager runs.
//
// The groups that run at a time share one set of informers: the first to
// start builds and starts them, a group that starts later adds what its
// controllers need, and they stop with the last group; a stopped group's
// controllers remove their event handlers. Every machine and node is
// cached once, not once per group.
//
// With --leader-elect, one client-go elector per group campaigns, with one
// identity, and a group's controllers are built when its lease is won and
// run while it is held; so next to a running MCM process,
// or another manager, no controller of a group runs twice, and nothing
// waits for a lease whose holder runs other controllers. The first
// group's lease is campaigned for at once, the second's once this manager
// leads the first, or two retry periods after it saw another holder of
// the first: two managers started together do not split the groups, and
// a holder of the first lease that never takes the second (MCM's
// machine-controller, a manager restricted to the machine controller) does
// not keep this manager from taking it.
//
// Run builds one API-server outage gate (package safety/outage) and one
// replacement budget (package safety/budget) and hands them to every
// controller it builds, of either group (ControllerContext.Outage and
// .Replacement). The gate's check runs as the safety controller, so the
// gate freezes the MachineSet and MachineDeployment controllers only while
// the safety controller runs in the same manager; a gate whose check does
// not run is not frozen. MCM's machine-controller-manager has no such
// freeze at all. The budget counts per deployment when a controller to run
// watches MachineSets (the safety, overshoot, MachineSet or
// MachineDeployment controller), per MachineSet otherwise.
//
// A lease is released (emptied, as client-go's ReleaseOnCancel does) only
// after every controller of the manager has stopped. Losing a lease stops
// that group's controllers at once, then the others; their leases are
// released and Run returns an error naming the lease: the process
// exits and its restart campaigns afresh, with fresh caches.
//
// # Health
//
// /healthz is 200 unless a leader has failed to renew one of its leases
// for 20s past its duration (client-go's HealthzAdaptor): then a restart
// helps.
//
// /readyz is 200 ("ok: ..." with the role) when the startup checks have
// passed, the manager is not shutting down, and either
//
//   - it is a standby (leader election on, it leads no group: each lease is
//     held by another instance or by nobody yet): it is ready because it
//     can take over at once, and a Deployment rollout must not wait for it
//     to lead ("standby; lease held by ..."); or
//   - it reconciles (it leads one group or both, or leader election is
//     off), every informer cache of the groups it runs has synced, and none
//     of its informers fails to list or watch ("leader; ..." for both
//     groups, "leader of machine-controller (standby for
//     machine-controller-manager, lease held by ...); ..." for one).
//
// Otherwise it is 503 with the reason: waiting for an API server or the
// CRDs, a new leader whose caches are syncing, informers that cannot list
// or watch (each named with its cluster, the error and since when: an API
// server out of reach, a CRD removed, RBAC that no longer allows it),
// driver calls stuck past their deadline (each named with its operation,
// machine and start, ten at most, the rest counted: they were abandoned
// and hold no worker, but their machines get no other driver call until
// they return), or shutting down. A failure counts until a list or
// watch of that resource succeeds, or for 90s if none is tried again.
// Lists and watches that are refused are retried every second instead of
// failing to the informer, whose own backoff would grow to 30s, so the
// caches follow the cluster again within a second of an outage's end. The
// safety controller's freeze during an outage is not unreadiness: once
// the informers list again, /readyz is 200 and says that the manager is
// frozen, while it is.
//
// A stored machine object that cannot be decoded (see package tolerant)
// does not make the manager unready: it is reported and left out.
//
// # Metrics
//
// /metrics serves the manager's own registry (never the global one): the
// Go and process collectors, mcm_manager_leader (1 while a group runs),
// mcm_manager_group_running{group} (1 while that group runs, 0 while this
// manager stands by for it), the driver's own metrics
// (the sim driver's requests to its simulated cloud, mcm_cloud_api_requests_total,
// mcm_cloud_api_requests_failed_total and
// mcm_cloud_api_api_request_duration_seconds), and everything the
// controllers register. Those are MCM's metrics under MCM's names, types
// and labels, so that dashboards, alerts and dependency-watchdog built
// for MCM read them unchanged: mcm_machine_* (the duration gauges
// labelled with the deployment and the class's instance type and zone),
// mcm_machine_set_*, mcm_machine_deployment_*,
// mcm_machine_stale_machines_total, mcm_misc_scrape_failure_total,
// mcm_workqueue_* and the driver's mcm_cloud_api_driver_*; besides them
// our own, such as the duration histograms mcm_machine_*_seconds and the
// drain engine's. Packages machine, machineset, deployment, workqueue and
// driver list them. The requests of the controllers' clients are counted
// as client-go's global metrics would count them, under MCM's names:
// rest_client_requests_total{code,method,host} and
// rest_client_request_latency_seconds{verb,url} (the URL with namespaces
// and names templated). MCM's mcm_reflector_* are not exported: client-go
// no longer reports reflector metrics. A standby has only the manager's and
// the driver's: a group's controller metrics appear when it starts leading
// that group.
//
// As in MCM, the server speaks plain HTTP and asks nobody who calls. With
// --metrics-secure (ours) it speaks HTTPS, with the certificate of
// --metrics-cert-file and --metrics-key-file (reread when they change) or
// one generated at start, and serves /metrics and /debug/pprof/ only to a
// bearer token the control cluster authenticates (a TokenReview) and whose
// user it authorizes to get that path (a SubjectAccessReview on the
// non-resource URL); an outcome is reused for a minute, a refusal for 10s.
// /healthz and /readyz stay open for the kubelet's probes.
// --metrics-secure with --port=0 is refused: nothing would be secured.
//
// # Shutdown
//
// On SIGINT or SIGTERM (Main uses signal.NotifyContext; a second signal
// kills at once) the controllers stop taking keys, finish the reconciles
// in flight (their context is cancelled) and drop the rest, the informers
// stop, the leases are released, the event broadcaster is flushed, the
// driver's background work ends and the HTTP server closes — typically
// in milliseconds, well within 5s.
//
// # Usage
//
// A binary is Main with the tables it wants; reference/main.go is exactly
// this line:
//
//	os.Exit(manager.Main("mcm", os.Args[1:], manager.DefaultControllers(), manager.BuiltinDrivers()))
//
// To run the manager inside a larger program instead, parse or build a
// Config, then New and Run:
//
//	cfg, err := manager.ParseFlags("mcm", args, manager.DefaultControllers(), manager.BuiltinDrivers(), os.Stderr)
//	m, err := manager.New(cfg, manager.Options{Controllers: manager.DefaultControllers(), Drivers: manager.BuiltinDrivers()})
//	err = m.Run(ctx) // until ctx ends or leadership is lost
//
// Run sets nothing that belongs to the whole process: Main installs the
// signal handlers, sets the garbage collector's target and, with
// --contention-profiling, the block profile rate; such a program sets what
// it wants of these itself.
//
// # Extending
//
// A controller is one line in DefaultControllers: its group, its
// resources, whether it needs the driver, and a constructor that takes its informers from the
// shared factories of the ControllerContext and returns its run function.
// A driver is one entry in the Drivers map handed to Main:
//
//	drivers := manager.BuiltinDrivers()
//	drivers["mycloud"] = func(ctx context.Context, env manager.DriverEnv) (driver.Driver, manager.Runnable, error) {
//		return mycloud.New(env.Logger), nil, nil
//	}
//	os.Exit(manager.Main("mycloud-mcm", os.Args[1:], manager.DefaultControllers(), drivers))
//
// examples/provider is such a program.
//
// # Layout
//
// This package is the composition root: the tables, the startup, the
// groups and their informers, the readiness and the HTTP server. What it
// composes lives in internal packages of reference: flags (Config, MCM's
// flags, spellings and ignored flags, validation), leases (the groups'
// leases), listwatch (the informers' list and watch health and retries),
// restmetrics (MCM's rest_client_* metrics) and metricsauth
// (--metrics-secure's certificate and access reviews).
package manager
