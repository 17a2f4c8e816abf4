package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/driver"
)

// Options configures a Cloud. The zero value is a cloud with instant boots
// and deletions, no quotas, any zone and instance type, and any API token.
type Options struct {
	// Clock drives boots, deletions and latency faults. Use a fake clock
	// (k8s.io/utils/clock/testing) for deterministic tests. Nil means the
	// real clock.
	Clock clock.Clock
	// Seed seeds the random source for jitter and probabilistic faults, so
	// that a run can be repeated exactly.
	Seed uint64
	// BootDelay is how long a new VM stays Provisioning, plus a uniformly
	// random extra of up to BootJitter. A providerSpec's bootDelay
	// replaces BootDelay.
	BootDelay, BootJitter time.Duration
	// DeleteDelay is how long a deleted VM stays Terminating, plus up to
	// DeleteJitter. A providerSpec's deleteDelay replaces DeleteDelay.
	DeleteDelay, DeleteJitter time.Duration
	// Zones the cloud has; a providerSpec naming another zone is
	// InvalidArgument. Empty accepts any zone.
	Zones []string
	// InstanceTypes the cloud offers, with their capacity (the default for
	// providerSpecs without a capacity). A providerSpec naming another type
	// is InvalidArgument. Empty accepts any type.
	InstanceTypes map[string]corev1.ResourceList
	// Quota limits the VMs CreateMachine may create; see Quota.
	Quota Quota
	// APIToken is the token the secret's apiToken must hold, else
	// Unauthenticated. Empty accepts any non-empty token.
	APIToken string
	// StateFile keeps the cloud's VMs in this file, so that they outlive
	// the process, as a real cloud's VMs outlive the manager that created
	// them: New loads the file if it exists (an absent file is an empty
	// cloud; one that does not hold a sim cloud's state is an error, never
	// an empty cloud) and creates it otherwise, and every change is saved
	// before the call that made it returns. See the package documentation
	// for what is kept. One process at a time: the file is read only in
	// New. Empty keeps the VMs in memory only.
	StateFile string
	// Registerer receives the cloud's API metrics (driver.CloudAPI, provider
	// ProviderName, service APIService): every call of the driver's VM
	// operations is one request to the simulated compute API. Nil records
	// none.
	Registerer prometheus.Registerer
}

// APIService is the service label of the simulated cloud's API requests.
const APIService = "compute"

// Quota limits what CreateMachine may create: a create that would exceed a
// limit fails with ResourceExhausted. Every VM that exists counts, including
// Stopped and Terminating ones and those added with AddVM, as a cloud bills
// them until they are gone. Zero values mean no limit.
type Quota struct {
	// MaxVMs limits the number of VMs.
	MaxVMs int
	// MaxVMsPerZone limits the number of VMs in each zone.
	MaxVMsPerZone int
	// MaxResources limits the sum of the VMs' capacities, per resource.
	MaxResources corev1.ResourceList
}

func (q Quota) validate() error {
	if q.MaxVMs < 0 || q.MaxVMsPerZone < 0 {
		return fmt.Errorf("sim: negative quota %+v", q)
	}
	return nil
}

// Cloud is an in-process simulated cloud. Its Driver creates and deletes
// VMs; its other methods are for tests: look at the VMs, inject faults and
// VMs, and change quotas. All methods are safe for concurrent use.
//
// A Cloud starts no goroutines. Boots and deletions complete by the clock:
// every access computes VM states from their timestamps and forgets VMs
// whose deletion has completed.
type Cloud struct {
	opts  Options // read-only after New; the quota lives in quota
	clock clock.Clock
	id    string // see ID; kept in the state file

	mu          sync.Mutex
	quota       Quota // opts.Quota, then SetQuota's
	rand        *rand.Rand
	vms         map[string]*vm // by provider ID
	issued      map[string]bool
	nextIP      netip.Addr
	faults      []*ActiveFault
	nextFaultID FaultID
	hangs       map[FaultID]chan struct{} // of Hang faults; closed on removal
	api         *driver.CloudAPIService   // nil: no metrics
	calls       map[driver.Operation]int
	changed     chan struct{}
	unsaved     bool // a change is not in the state file yet
}

// New returns an empty Cloud, or with Options.StateFile the cloud that the
// file holds.
func New(opts Options) (*Cloud, error) {
	for _, d := range []time.Duration{opts.BootDelay, opts.BootJitter, opts.DeleteDelay, opts.DeleteJitter} {
		if d < 0 {
			return nil, fmt.Errorf("sim: negative delay %v in options", d)
		}
	}
	if err := opts.Quota.validate(); err != nil {
		return nil, err
	}
	c := &Cloud{
		opts:    opts,
		clock:   opts.Clock,
		id:      "cloud-" + strconv.FormatUint(rand.Uint64(), 36),
		rand:    rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)),
		vms:     map[string]*vm{},
		issued:  map[string]bool{},
		nextIP:  netip.AddrFrom4([4]byte{10, 0, 0, 0}),
		calls:   map[driver.Operation]int{},
		changed: make(chan struct{}),
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.opts.Zones = slices.Clone(opts.Zones)
	c.opts.InstanceTypes = maps.Clone(opts.InstanceTypes)
	c.quota = opts.Quota
	c.quota.MaxResources = opts.Quota.MaxResources.DeepCopy()
	api, err := driver.NewCloudAPI(opts.Registerer, ProviderName)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if c.api, err = api.Service(APIService); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if opts.StateFile != "" {
		if err := c.restore(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// recordAPICall records a driver call that began at start and returned
// *err (a driver method defers it) as one request to the simulated compute API. A request fails when
// the cloud refuses it (an injected fault, a quota, bad credentials or
// input, a canceled context); one that reports what it found (no VM, a VM
// waiting for initialization, several VMs, a VM that does not match) was
// answered, as a real cloud's lookup that finds nothing is.
func (c *Cloud) recordAPICall(start time.Time, err *error) {
	switch driver.CodeOf(*err) {
	case driver.OK, driver.NotFound, driver.Uninitialized, driver.OutOfRange, driver.AlreadyExists:
		c.api.Record(c.clock.Since(start), false)
	default:
		c.api.Record(c.clock.Since(start), true)
	}
}

// ID identifies the cloud: random for a new cloud, and kept in the state
// file, so that a process restarted with Options.StateFile has the ID of
// the one before. Use it as KubeletOptions.Identity: the kubelet of a
// restarted process then carries on with the Nodes its predecessor
// registered, instead of leaving them to go NotReady.
func (c *Cloud) ID() string { return c.id }

// Driver returns the driver.Driver of the cloud. It implements every
// operation; see the package documentation for its behaviour.
func (c *Cloud) Driver() driver.Driver { return &cloudDriver{cloud: c} }

// SetQuota replaces the quota. VMs over the new quota stay; only creates
// are refused.
func (c *Cloud) SetQuota(q Quota) error {
	if err := q.validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q.MaxResources = q.MaxResources.DeepCopy()
	c.quota = q
	return nil
}

// Calls returns how many times the driver's operation was called, failed
// calls included.
func (c *Cloud) Calls(op driver.Operation) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// Changed returns a channel that is closed at the next change made through
// a call (a VM created, deleted, initialized, added, removed, stopped or
// started, or a completed deletion noticed). Changes that only need time to
// pass (a boot or deletion completing) close it only when some later access
// notices them; wait for NextTransition for those. Together they let an
// observer, such as a simulated kubelet, wait for VM events without polling:
//
//	for {
//		vms := cloud.VMs()
//		// ... react to vms ...
//		changed := cloud.Changed() // before VMs, in a real loop, to miss nothing
//		var timer <-chan time.Time
//		if t, ok := cloud.NextTransition(); ok {
//			timer = clk.After(t.Sub(clk.Now()))
//		}
//		select {
//		case <-changed:
//		case <-timer:
//		case <-ctx.Done():
//			return
//		}
//	}
func (c *Cloud) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// NextTransition returns the earliest time at which a VM changes state by
// itself (a boot or a deletion completes), if any VM will.
func (c *Cloud) NextTransition() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.pruneLocked(now)
	var next time.Time
	for _, v := range c.vms {
		if _, _, until := v.state(now); !until.IsZero() && (next.IsZero() || until.Before(next)) {
			next = until
		}
	}
	return next, !next.IsZero()
}

// notifyLocked wakes everybody waiting on Changed, and marks the change
// for the state file. Every change passes here, so none escapes saveLocked.
func (c *Cloud) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
	c.unsaved = true
}

// pruneLocked forgets VMs whose deletion has completed.
func (c *Cloud) pruneLocked(now time.Time) {
	removed := false
	for id, v := range c.vms {
		if v.deleting && !now.Before(v.goneAt) {
			delete(c.vms, id)
			removed = true
		}
	}
	if removed {
		c.notifyLocked()
	}
}

// delayLocked returns base plus a random jitter in [0, jitter).
func (c *Cloud) delayLocked(base, jitter time.Duration) time.Duration {
	if jitter <= 0 {
		return base
	}
	return base + time.Duration(c.rand.Int64N(int64(jitter)))
}

// maxVMName bounds VM (and so Node) names: a Node's name is the value of
// its kubernetes.io/hostname label and of its Machine's node label, and a
// label value has at most 63 characters.
const maxVMName = 63

// vmName is the name of the n-th VM (from 1) the cloud issued for a
// machine: the machine's name, with "-n" after the first, cut to fit
// maxVMName as clouds cut host names.
func vmName(machineName string, n int) string {
	suffix := ""
	if n > 1 {
		suffix = "-" + strconv.Itoa(n)
	}
	base := machineName
	if len(base)+len(suffix) > maxVMName {
		base = strings.TrimRight(base[:maxVMName-len(suffix)], "-.")
	}
	return base + suffix
}

// newVMLocked creates and stores a VM with a fresh provider ID and address.
func (c *Cloud) newVMLocked(now time.Time, machineName, zone, instanceType string, class ClassTags) *vm {
	name := vmName(machineName, 1)
	for n := 2; c.issued[providerID(zone, name)]; n++ {
		name = vmName(machineName, n)
	}
	id := providerID(zone, name)
	c.issued[id] = true
	c.nextIP = c.nextIP.Next()
	v := &vm{
		id: id, name: name, machineName: machineName, class: class, zone: zone, instanceType: instanceType,
		addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: c.nextIP.String()},
			{Type: corev1.NodeHostName, Address: name},
		},
		createdAt: now,
	}
	c.vms[id] = v
	return v
}

func providerID(zone, name string) string { return "sim:///" + zone + "/" + name }

// liveVMsLocked returns the VMs the driver sees for the machine, oldest
// first.
func (c *Cloud) liveVMsLocked(machineName string) []*vm {
	var out []*vm
	for _, v := range c.vms {
		if v.live() && v.machineName == machineName {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *vm) int {
		return cmp.Or(a.createdAt.Compare(b.createdAt), cmp.Compare(a.id, b.id))
	})
	return out
}

// checkQuotaLocked reports ResourceExhausted if one more VM in zone with
// capacity would exceed the quota.
func (c *Cloud) checkQuotaLocked(zone string, capacity corev1.ResourceList) error {
	q := c.quota
	inZone := 0
	used := corev1.ResourceList{}
	for _, v := range c.vms {
		if v.zone == zone {
			inZone++
		}
		for name, amount := range v.capacity {
			sum := used[name]
			sum.Add(amount)
			used[name] = sum
		}
	}
	var exceeded []error
	if q.MaxVMs > 0 && len(c.vms)+1 > q.MaxVMs {
		exceeded = append(exceeded, fmt.Errorf("%d VMs of %d allowed exist", len(c.vms), q.MaxVMs))
	}
	if q.MaxVMsPerZone > 0 && inZone+1 > q.MaxVMsPerZone {
		exceeded = append(exceeded, fmt.Errorf("%d VMs of %d allowed exist in zone %s", inZone, q.MaxVMsPerZone, zone))
	}
	for _, name := range slices.Sorted(maps.Keys(q.MaxResources)) {
		limit := q.MaxResources[name]
		want := used[name]
		want.Add(capacity[name])
		if want.Cmp(limit) > 0 {
			inUse, requested := used[name], capacity[name]
			exceeded = append(exceeded, fmt.Errorf("%s: %s in use, %s requested, %s allowed",
				name, inUse.String(), requested.String(), limit.String()))
		}
	}
	if len(exceeded) > 0 {
		return &driver.Error{Code: driver.ResourceExhausted, Message: "sim: quota exceeded", Cause: errors.Join(exceeded...)}
	}
	return nil
}
