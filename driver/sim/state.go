package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mcmkit/mcm/driver"
)

// stateVersion is the version of the state file's format. New refuses a
// file of another version rather than guess at its meaning.
const stateVersion = 1

// cloudState is the content of a state file: what a cloud keeps of its VMs
// when no process runs it. Faults, quotas and call counts are the
// process's test setup, not the cloud's, and are not kept.
type cloudState struct {
	Version int `json:"version"`
	// Cloud is Cloud.ID, kept so that the simulated kubelet of a restarted
	// process recognises the Nodes of the one before.
	Cloud string `json:"cloud"`
	// LastAddress is the last internal IP handed out: addresses are not
	// reused across restarts either.
	LastAddress string `json:"lastAddress"`
	// IssuedProviderIDs are every provider ID the cloud ever handed out,
	// so that none is reused after a restart.
	IssuedProviderIDs []string  `json:"issuedProviderIDs"`
	VMs               []vmState `json:"vms"`
}

// vmState is one VM in a state file. Times are absolute, so that a boot or
// deletion that was in flight when the process ended completes when it was
// due, as it would in a real cloud that went on without the process.
type vmState struct {
	ProviderID            string               `json:"providerID"`
	Name                  string               `json:"name"`
	MachineName           string               `json:"machineName"`
	Class                 classState           `json:"class"`
	Zone                  string               `json:"zone"`
	InstanceType          string               `json:"instanceType"`
	Capacity              corev1.ResourceList  `json:"capacity,omitempty"`
	Labels                map[string]string    `json:"labels,omitempty"`
	UserData              []byte               `json:"userData,omitempty"`
	Addresses             []corev1.NodeAddress `json:"addresses"`
	CreatedAt             time.Time            `json:"createdAt"`
	BootStartedAt         time.Time            `json:"bootStartedAt"`
	BootedAt              time.Time            `json:"bootedAt"`
	Stopped               bool                 `json:"stopped,omitempty"`
	StoppedAt             time.Time            `json:"stoppedAt,omitzero"`
	DeleteDelay           string               `json:"deleteDelay"` // a Go duration
	Deleting              bool                 `json:"deleting,omitempty"`
	DeleteRequestedAt     time.Time            `json:"deleteRequestedAt,omitzero"`
	GoneAt                time.Time            `json:"goneAt,omitzero"`
	RequireInitialization bool                 `json:"requireInitialization,omitempty"`
	Initialized           bool                 `json:"initialized,omitempty"`
	Injected              bool                 `json:"injected,omitempty"`
	// The in-place update's parts (Agent): absent in files written before
	// them, which keeps such files readable at the same version.
	KubeletVersion string         `json:"kubeletVersion,omitempty"`
	InPlaceUpdate  *InPlaceUpdate `json:"inPlaceUpdate,omitempty"`
	UpdatedTo      *classState    `json:"updatedTo,omitempty"`
	UpdatedAt      time.Time      `json:"updatedAt,omitzero"`
}

type classState struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// restore loads Options.StateFile into the new cloud c, or, if the file
// does not exist, creates it, so that a path that cannot be written fails
// New rather than the first create.
func (c *Cloud) restore() error {
	path := c.opts.StateFile
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.unsaved = true
		if err := c.saveLocked(); err != nil {
			return fmt.Errorf("sim: creating state file: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sim: reading state file: %w", err)
	}
	state, err := decodeState(data)
	if err != nil {
		// Never an empty cloud instead: every machine's VM would look
		// gone, and the machine controller would replace them all.
		return fmt.Errorf("sim: state file %s does not hold a sim cloud's state (move it away to start with an empty cloud): %w", path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apply(state)
	return nil
}

// decodeState decodes and checks a state file strictly: unknown fields,
// trailing data and inconsistent VMs are errors, as the file may have been
// edited by hand or truncated.
func decodeState(data []byte) (cloudState, error) {
	var s cloudState
	if len(bytes.TrimSpace(data)) == 0 {
		return s, errors.New("the file is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return s, errors.New("data after the state")
	}
	if s.Version != stateVersion {
		return s, fmt.Errorf("version %d, this sim reads version %d", s.Version, stateVersion)
	}
	var errs []error
	if s.Cloud == "" {
		errs = append(errs, errors.New("no cloud ID"))
	}
	if a, err := netip.ParseAddr(s.LastAddress); err != nil || !a.Is4() {
		errs = append(errs, fmt.Errorf("lastAddress %q is not an IPv4 address", s.LastAddress))
	}
	seen := map[string]bool{}
	for i, v := range s.VMs {
		if err := v.validate(); err != nil {
			errs = append(errs, fmt.Errorf("vms[%d]: %w", i, err))
		}
		if seen[v.ProviderID] {
			errs = append(errs, fmt.Errorf("vms[%d]: provider ID %s appears twice", i, v.ProviderID))
		}
		seen[v.ProviderID] = true
	}
	return s, errors.Join(errs...)
}

func (v vmState) validate() error {
	var errs []error
	if v.MachineName == "" || v.Name == "" || v.Zone == "" || v.InstanceType == "" {
		errs = append(errs, fmt.Errorf("VM %q needs machineName, name, zone and instanceType", v.ProviderID))
	}
	if want := providerID(v.Zone, v.Name); v.ProviderID != want {
		errs = append(errs, fmt.Errorf("provider ID %q, want %q for its zone and name", v.ProviderID, want))
	}
	if d, err := time.ParseDuration(v.DeleteDelay); err != nil || d < 0 {
		errs = append(errs, fmt.Errorf("VM %s: deleteDelay %q is not a duration", v.ProviderID, v.DeleteDelay))
	}
	if _, err := version.ParseSemantic(v.KubeletVersion); v.KubeletVersion != "" && err != nil {
		errs = append(errs, fmt.Errorf("VM %s: kubeletVersion %q is not a semantic version", v.ProviderID, v.KubeletVersion))
	}
	if v.Deleting && v.GoneAt.IsZero() {
		errs = append(errs, fmt.Errorf("VM %s is deleting but has no goneAt", v.ProviderID))
	}
	return errors.Join(errs...)
}

// apply makes the decoded state the cloud's.
func (c *Cloud) apply(s cloudState) {
	c.id = s.Cloud
	c.nextIP = netip.MustParseAddr(s.LastAddress) // checked by decodeState
	for _, id := range s.IssuedProviderIDs {
		c.issued[id] = true
	}
	for _, r := range s.VMs {
		deleteDelay, _ := time.ParseDuration(r.DeleteDelay) // checked by decodeState
		c.vms[r.ProviderID] = &vm{
			id: r.ProviderID, name: r.Name, machineName: r.MachineName,
			class: ClassTags{Cluster: r.Class.Cluster, Namespace: r.Class.Namespace, Name: r.Class.Name},
			zone:  r.Zone, instanceType: r.InstanceType,
			capacity: r.Capacity, labels: r.Labels, userData: r.UserData, addresses: r.Addresses,
			createdAt: r.CreatedAt, bootStartedAt: r.BootStartedAt, bootedAt: r.BootedAt,
			stopped: r.Stopped, stoppedAt: r.StoppedAt,
			deleteDelay: deleteDelay, deleting: r.Deleting, deleteRequestedAt: r.DeleteRequestedAt, goneAt: r.GoneAt,
			requireInit: r.RequireInitialization, initialized: r.Initialized, injected: r.Injected,
			kubeletVersion: r.KubeletVersion, inPlace: r.InPlaceUpdate, updatedAt: r.UpdatedAt,
		}
		if u := r.UpdatedTo; u != nil {
			c.vms[r.ProviderID].updatedTo = ClassTags{Cluster: u.Cluster, Namespace: u.Namespace, Name: u.Name}
		}
		// A file that misses the ID of one of its VMs would otherwise let
		// the ID be handed out again.
		c.issued[r.ProviderID] = true
	}
}

// updatedToState is the state file's form of a VM's UpdatedTo: absent
// for a VM never updated in place.
func updatedToState(t ClassTags) *classState {
	if t.IsZero() {
		return nil
	}
	return &classState{Cluster: t.Cluster, Namespace: t.Namespace, Name: t.Name}
}

// stateLocked returns what the state file keeps of the cloud.
func (c *Cloud) stateLocked() cloudState {
	s := cloudState{
		Version:           stateVersion,
		Cloud:             c.id,
		LastAddress:       c.nextIP.String(),
		IssuedProviderIDs: slices.Sorted(maps.Keys(c.issued)),
		VMs:               make([]vmState, 0, len(c.vms)),
	}
	for _, v := range c.vms {
		s.VMs = append(s.VMs, vmState{
			ProviderID: v.id, Name: v.name, MachineName: v.machineName,
			Class: classState{Cluster: v.class.Cluster, Namespace: v.class.Namespace, Name: v.class.Name},
			Zone:  v.zone, InstanceType: v.instanceType,
			Capacity: v.capacity, Labels: v.labels, UserData: v.userData, Addresses: v.addresses,
			CreatedAt: v.createdAt, BootStartedAt: v.bootStartedAt, BootedAt: v.bootedAt,
			Stopped: v.stopped, StoppedAt: v.stoppedAt,
			DeleteDelay: v.deleteDelay.String(), Deleting: v.deleting, DeleteRequestedAt: v.deleteRequestedAt, GoneAt: v.goneAt,
			RequireInitialization: v.requireInit, Initialized: v.initialized, Injected: v.injected,
			KubeletVersion: v.kubeletVersion, InPlaceUpdate: v.inPlace, UpdatedTo: updatedToState(v.updatedTo), UpdatedAt: v.updatedAt,
		})
	}
	slices.SortFunc(s.VMs, func(a, b vmState) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ProviderID, b.ProviderID))
	})
	return s
}

// saveLocked writes the cloud to the state file if anything changed since
// the last successful write. A change that could not be written stays
// pending, and the next call writes it along with its own.
func (c *Cloud) saveLocked() error {
	if c.opts.StateFile == "" || !c.unsaved {
		return nil
	}
	data, err := json.MarshalIndent(c.stateLocked(), "", "  ")
	if err != nil {
		return fmt.Errorf("sim: encoding state: %w", err)
	}
	if err := writeFileAtomically(c.opts.StateFile, append(data, '\n')); err != nil {
		return fmt.Errorf("sim: saving state: %w", err)
	}
	c.unsaved = false
	return nil
}

// savedLocked returns resp once the state file holds every change so far,
// and Unavailable if it cannot be written: a driver call must not report
// what a restarted process would not find. The change stays made, as when
// a cloud acts but its response is lost, and a retry of the call, which
// finds it, writes it again.
func savedLocked[R any](c *Cloud, resp *R) (*R, error) {
	if err := c.saveLocked(); err != nil {
		return nil, &driver.Error{Code: driver.Unavailable, Message: "sim: the cloud could not save its state", Cause: err}
	}
	return resp, nil
}

// writeFileAtomically replaces path with data through a temporary file in
// the same directory and a rename, so that a process killed mid-write
// leaves the old file or the new one, never a part of either.
func writeFileAtomically(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	// Sync before the rename: after a power loss the new name must not
	// point at data that never reached the disk.
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
