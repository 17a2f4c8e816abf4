package manager

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/leaderelection"
)

// state is what /readyz reports. Ready means:
//
//   - the API servers answered and the machine CRDs are served (the
//     startup checks passed), the driver is built, and the manager is not
//     shutting down; and
//   - either it is a standby: leader election is on and another instance
//     holds (or nobody yet holds) the lease — a standby is ready because it
//     can take over at once, and a rollout of the Deployment must not wait
//     for it to lead; or it reconciles (it leads, or leader election is
//     off) and the informer caches of every running controller have
//     synced.
//
// So a leader is not ready between acquiring the lease and its caches
// syncing, and nobody is ready while the control cluster is unreachable at
// startup. A leader whose informers cannot list or watch (an API server
// out of reach, a CRD gone, RBAC that no longer allows it) is not ready
// until they can again; it says which, and why. A restart would not help,
// so /healthz stays ok.
type state struct {
	mu          sync.Mutex
	waiting     string // startup phase still in progress; "" once done
	leaderElect bool
	leading     bool
	holder      string
	synced      bool
	skipped     []string // controllers skipped for missing CRDs
	stopping    bool
	// gate is the running safety controller's gate, nil when none runs;
	// /readyz says when it is frozen.
	gate SafetyGate
	// listWatch tells which informers cannot list or watch; nil in tests
	// of the state alone.
	listWatch *listWatchHealth
}

func (s *state) setWaiting(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = why
}

func (s *state) update(f func(*state)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// readiness returns whether the manager is ready and why, in one line.
func (s *state) readiness() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	note := ""
	if len(s.skipped) > 0 {
		note = "; skipped controllers: " + strings.Join(s.skipped, ", ")
	}
	switch {
	case s.stopping:
		return false, "shutting down"
	case s.waiting != "":
		return false, "starting: " + s.waiting
	case s.leaderElect && !s.leading:
		holder := s.holder
		if holder == "" {
			holder = "nobody yet"
		}
		return true, "standby; lease held by " + holder + note
	case !s.synced:
		return false, "leading; waiting for informer caches to sync" + s.listWatchFailures()
	case s.listWatchFailures() != "":
		// A cache that cannot list or watch no longer follows its cluster:
		// what the controllers decide from it may be stale.
		return false, "leading" + s.listWatchFailures()
	default:
		role := "leader"
		if !s.leaderElect {
			role = "running without leader election"
		}
		// Frozen is not unready: the manager works, deletions go on, and
		// it thaws by itself; a restart would help nothing.
		if s.gate != nil && s.gate.Frozen(context.Background()) {
			note += "; frozen: an API server is out of reach, no machine is created or replaced"
		}
		return true, role + "; caches synced" + note
	}
}

// listWatchFailures says which informers cannot list or watch, or "".
func (s *state) listWatchFailures() string {
	if s.listWatch == nil {
		return ""
	}
	if failing := s.listWatch.failures(); len(failing) > 0 {
		return "; informers cannot list or watch: " + strings.Join(failing, "; ")
	}
	return ""
}

// newMux serves /metrics from reg, /healthz, /readyz and, with profiling,
// /debug/pprof/.
func newMux(reg *prometheus.Registry, st *state, watchdog *leaderelection.HealthzAdaptor, profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		// Alive unless the leader has failed to renew its lease for too
		// long: then a restart is the way out.
		if watchdog != nil {
			if err := watchdog.Check(r); err != nil {
				http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := st.readiness()
		if !ok {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok: "+why)
	})
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
