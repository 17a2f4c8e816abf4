// Package testenv gives integration tests a real Kubernetes control plane:
// etcd, kube-apiserver, kube-controller-manager (garbage collector,
// disruption, namespace, service-account, node-lifecycle, attach-detach and
// the other default controllers) and kube-scheduler, as child processes
// bound to loopback ports, with their own CA, serving certificate,
// service-account keys, static-token authentication and RBAC. It wraps
// internal/controlplane, which starts and stops the clusters (and which
// binaries such as the `make run` demo use without package testing), with
// what tests need: one cluster per package started on first use,
// a namespace per test, the component logs of a failing test, and the
// skip when the binaries are missing.
//
// The binaries come from hack/testenv.sh (make testenv), which builds them
// from the Go module proxy into $MCM_TESTENV_DIR/bin (default
// ~/.cache/mcm/testenv/<version>/bin). When they are missing, integration
// tests skip with one line naming make testenv; with MCM_REQUIRE_TESTENV=1,
// as make test sets it, they fail instead.
//
// Each test package gets one control cluster, started on first use and
// stopped after the package's tests; each test gets its own namespace. A
// second, independent cluster is available for tests where the control
// cluster (Machines) and the target cluster (Nodes, Pods) differ. Component
// logs are kept in the cluster's temp dir; when a test fails, the lines each
// component logged during that test are printed. MCM_TESTENV_KEEP=1 keeps the
// temp dirs after the run.
//
// # Usage
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, testenv.Options{
//			Setup: []func(context.Context, *rest.Config) error{crds.Install},
//		})
//	}
//
//	func TestSomething(t *testing.T) {
//		env := testenv.Get(t)
//		ns := env.Namespace(t)
//		client := versioned.NewForConfigOrDie(env.Config())
//		...
//		out, err := env.Kubectl(ctx, "get", "mc", "-n", ns)
//	}
package testenv
