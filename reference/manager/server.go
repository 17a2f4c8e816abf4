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

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/safety"
)

// state is what /readyz reports. Ready means:
//
//   - the API servers answered and the machine CRDs are served (the
//     startup checks passed), the driver is built, and the manager is not
//     shutting down; and
//   - either it is a standby: leader election is on and it leads no group
//     (another instance holds, or nobody yet holds, each lease) — a
//     standby is ready because it can take over at once, and a rollout of
//     the Deployment must not wait for it to lead; or it runs groups (it
//     leads them, or leader election is off) and the informer caches of
//     every group it runs have synced.
//
// A leader, or a manager without leader election, whose driver has calls
// stuck past their deadline (see driver.WithDeadlines) is not ready
// either, and names them: its workers are free, but those machines get no
// driver call until the stuck ones return.
//
// So a leader is not ready between acquiring a lease and that group's
// caches syncing, and nobody is ready while the control cluster is
// unreachable at startup. A leader whose informers cannot list or watch
// (an API server out of reach, a CRD gone, RBAC that no longer allows it)
// is not ready until they can again; it says which, and why. A restart
// would not help, so /healthz stays ok.
type state struct {
	mu          sync.Mutex
	waiting     string // startup phase still in progress; "" once done
	leaderElect bool
	// groups are the groups this manager runs or campaigns for, in the
	// order of groups; set once the startup checks passed.
	groups []*groupState
	// synced: the informer caches of every running group have synced
	// (kept by syncGroups).
	synced   bool
	skipped  []string // controllers skipped for missing CRDs
	stopping bool
	// outage is the manager's outage gate; /readyz says when it is
	// frozen. Nil until Run built it, and in tests of the state alone.
	outage safety.Gate
	// listWatch tells which informers cannot list or watch; nil in tests
	// of the state alone.
	listWatch failingListWatches
	// driverCalls tells which driver calls outlived their deadline and
	// have not returned; nil until the driver is built, and without one.
	driverCalls stuckCalls
}

// failingListWatches is what /readyz needs of *listwatch.Health.
type failingListWatches interface {
	Failures() []string
}

// stuckCalls is what /readyz needs of *driver.Deadlines.
type stuckCalls interface {
	Stuck() []driver.StuckCall
}

// maxStuckNamed bounds how many stuck calls /readyz names, so that a
// cloud that hangs for thousands of machines does not make a line of
// megabytes; the rest are counted.
const maxStuckNamed = 10

// groupState is one group's part of the state.
type groupState struct {
	group Group
	lease string // "" without leader election
	// running: its controllers run (it leads, or no leader election).
	running bool
	synced  bool
	holder  string // the lease's holder, as last observed
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

func (s *state) setHolder(g Group, holder string) {
	s.update(func(s *state) {
		for _, gs := range s.groups {
			if gs.group == g {
				gs.holder = holder
			}
		}
	})
}

func (s *state) setSynced(g Group, synced bool) {
	s.update(func(s *state) {
		for _, gs := range s.groups {
			if gs.group == g {
				gs.synced = synced
			}
		}
		s.syncGroups()
	})
}

// syncGroups derives synced from the groups; call it with mu held.
func (s *state) syncGroups() {
	s.synced = true
	for _, gs := range s.groups {
		s.synced = s.synced && (gs.synced || !gs.running)
	}
}

// readiness returns whether the manager is ready and why, in one line.
func (s *state) readiness() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	note := ""
	if len(s.skipped) > 0 {
		note = "; skipped controllers: " + strings.Join(s.skipped, ", ")
	}
	var running, standing []*groupState
	for _, g := range s.groups {
		if g.running {
			running = append(running, g)
		} else {
			standing = append(standing, g)
		}
	}
	switch {
	case s.stopping:
		return false, "shutting down"
	case s.waiting != "":
		return false, "starting: " + s.waiting
	case s.leaderElect && len(running) == 0:
		return true, "standby; " + holders(standing) + note
	}
	role := "leader"
	switch {
	case !s.leaderElect:
		role = "running without leader election"
	case len(standing) > 0:
		role = "leader of " + groupNames(running) + " (standby for " + groupNames(standing) + ", " + holders(standing) + ")"
	}
	// "leader" reads "leading" while not ready: what is not ready yet.
	acting := role
	if s.leaderElect {
		acting = "leading" + strings.TrimPrefix(role, "leader")
	}
	if !s.synced {
		return false, acting + "; waiting for informer caches to sync" + s.listWatchFailures()
	}
	if failures := s.listWatchFailures(); failures != "" {
		// A cache that cannot list or watch no longer follows its cluster:
		// what the controllers decide from it may be stale.
		return false, acting + failures
	}
	if stuck := s.stuckDriverCalls(); stuck != "" {
		// The workers are free (the calls were abandoned at their
		// deadline), but the machines of these calls get no driver call
		// until they return: the cloud, or the driver, needs a look.
		return false, role + stuck
	}
	// Frozen is not unready: the manager works, deletions go on, and it
	// thaws by itself; a restart would help nothing.
	if s.outage != nil && s.outage.Frozen(context.Background()) {
		note += "; frozen: an API server is out of reach, no machine is created or replaced"
	}
	return true, role + "; caches synced" + note
}

// holders says who holds the leases of gs: "lease held by a", or, when
// they differ, "lease machine-controller held by a, lease
// machine-controller-manager held by b". A lease not seen held (a second
// campaign not started yet, or a free lease) is left out when another is
// seen held.
func holders(gs []*groupState) string {
	var seen []*groupState
	for _, g := range gs {
		if g.holder != "" {
			seen = append(seen, g)
		}
	}
	if len(seen) == 0 {
		return "lease held by nobody yet"
	}
	same := true
	for _, g := range seen {
		same = same && g.holder == seen[0].holder
	}
	if same {
		return "lease held by " + seen[0].holder
	}
	parts := make([]string, len(seen))
	for i, g := range seen {
		parts[i] = "lease " + g.lease + " held by " + g.holder
	}
	return strings.Join(parts, ", ")
}

func groupNames(gs []*groupState) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = string(g.group)
	}
	return strings.Join(names, ", ")
}

// listWatchFailures says which informers cannot list or watch, or "".
func (s *state) listWatchFailures() string {
	if s.listWatch == nil {
		return ""
	}
	if failing := s.listWatch.Failures(); len(failing) > 0 {
		return "; informers cannot list or watch: " + strings.Join(failing, "; ")
	}
	return ""
}

// stuckDriverCalls names the driver calls stuck past their deadline, or "".
func (s *state) stuckDriverCalls() string {
	if s.driverCalls == nil {
		return ""
	}
	stuck := s.driverCalls.Stuck()
	if len(stuck) == 0 {
		return ""
	}
	names := make([]string, 0, min(len(stuck), maxStuckNamed))
	for _, c := range stuck[:min(len(stuck), maxStuckNamed)] {
		names = append(names, c.String())
	}
	more := ""
	if n := len(stuck) - len(names); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("; %d driver calls outlived their deadline and have not returned (their machines get no other call until they do): %s%s",
		len(stuck), strings.Join(names, "; "), more)
}

// newMux serves /metrics from reg, /healthz, /readyz and, with profiling,
// /debug/pprof/.
func newMux(reg *prometheus.Registry, st *state, watchdogs []*leaderelection.HealthzAdaptor, profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		// Alive unless a leader has failed to renew its lease for too
		// long: then a restart is the way out.
		for _, watchdog := range watchdogs {
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
