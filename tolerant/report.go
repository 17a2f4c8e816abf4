package tolerant

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

// ReasonUndecodable is the reason of the event on an undecodable object.
const ReasonUndecodable = "UndecodableObject"

// badKey names a stored object.
type badKey struct{ kind, namespace, name string }

// reporter remembers the undecodable objects, to report each version once
// and to keep the gauge to the objects still stored that way.
type reporter struct {
	recorder record.EventRecorder
	logger   logr.Logger
	gauge    *prometheus.GaugeVec // nil without a Registerer

	count atomic.Int32 // len(bad), read without the lock on the hot path
	mu    sync.Mutex
	bad   map[badKey]string          // resource version reported
	seen  map[string]map[badKey]bool // per kind, during a list
}

func newReporter(opts Options) (*reporter, error) {
	r := &reporter{recorder: opts.Recorder, logger: opts.Logger, bad: map[badKey]string{}, seen: map[string]map[badKey]bool{}}
	if opts.Registerer != nil {
		g, err := promreg.Register(opts.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcm_undecodable_objects",
			Help: "1 for each stored machine.sapcloud.io object that cannot be decoded and is left out of the informers' caches until it is fixed or deleted.",
		}, []string{"kind", "namespace", "name"}))
		if err != nil {
			return nil, err
		}
		r.gauge = g
	}
	return r, nil
}

// metadataOf reads the metadata of an object that does not decode as a
// whole; what is wrong with it is in its spec or status, not here.
func metadataOf(kind string, raw []byte) (badKey, metav1.ObjectMeta) {
	var partial metav1.PartialObjectMetadata
	_ = json.Unmarshal(raw, &partial)
	return badKey{kind, partial.Namespace, partial.Name}, partial.ObjectMeta
}

// undecodable reports an object that does not decode, once per version.
func (r *reporter) undecodable(kind string, raw []byte, err error) {
	key, meta := metadataOf(kind, raw)
	r.mu.Lock()
	if seen := r.seen[kind]; seen != nil {
		seen[key] = true
	}
	reported, known := r.bad[key]
	if known && reported == meta.ResourceVersion {
		r.mu.Unlock()
		return
	}
	r.bad[key] = meta.ResourceVersion
	r.count.Store(int32(len(r.bad)))
	r.mu.Unlock()

	if r.gauge != nil {
		r.gauge.WithLabelValues(kind, key.namespace, key.name).Set(1)
	}
	r.logger.Error(err, "Stored object cannot be decoded; leaving it out of the cache until it is fixed or deleted",
		"kind", kind, "namespace", key.namespace, "name", key.name, "resourceVersion", meta.ResourceVersion)
	if r.recorder != nil {
		ref := &corev1.ObjectReference{
			APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: kind,
			Namespace: key.namespace, Name: key.name, UID: meta.UID, ResourceVersion: meta.ResourceVersion,
		}
		r.recorder.Eventf(ref, corev1.EventTypeWarning, ReasonUndecodable,
			"%s %s/%s cannot be decoded, so no controller sees it until it is fixed or deleted: %v", kind, key.namespace, key.name, err)
	}
}

// decoded notes that obj decodes, as an object reported before may do
// once it is fixed.
func (r *reporter) decoded(kind string, obj metav1.Object) {
	if r.count.Load() == 0 {
		return
	}
	r.forget(badKey{kind, obj.GetNamespace(), obj.GetName()})
}

// deleted notes that an object, decodable or not, is gone.
func (r *reporter) deleted(kind string, raw []byte) {
	if r.count.Load() == 0 {
		return
	}
	key, _ := metadataOf(kind, raw)
	r.forget(key)
}

func (r *reporter) forget(key badKey) {
	r.mu.Lock()
	_, known := r.bad[key]
	delete(r.bad, key)
	r.count.Store(int32(len(r.bad)))
	r.mu.Unlock()
	if known && r.gauge != nil {
		r.gauge.DeleteLabelValues(key.kind, key.namespace, key.name)
	}
}

// startList begins a full list of kind: the objects of kind reported before
// and not met again by endList are gone or fixed.
func (r *reporter) startList(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[kind] = map[badKey]bool{}
}

func (r *reporter) endList(kind string) {
	r.mu.Lock()
	seen := r.seen[kind]
	delete(r.seen, kind)
	var gone []badKey
	for key := range r.bad {
		if key.kind == kind && seen != nil && !seen[key] {
			gone = append(gone, key)
		}
	}
	r.mu.Unlock()
	for _, key := range gone {
		r.forget(key)
	}
}
