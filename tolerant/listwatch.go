package tolerant

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/client/clientset/versioned/scheme"
)

// kindBase is what the tolerant informers need of a kind besides its type.
type kindBase struct {
	client    rest.Interface
	namespace string
	resource  string // plural, as in the URL
	name      string // Kind, for reports
	report    *reporter
}

// kind is one machine kind as the tolerant informers read it.
type kind[T any] struct {
	kindBase
	list func(metav1.ListMeta, []T) runtime.Object
}

// rawList is a list response with its items left undecoded.
type rawList struct {
	metav1.ListMeta `json:"metadata"`
	Items           []json.RawMessage `json:"items"`
}

// rawEvent is a watch event with its object left undecoded.
type rawEvent struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// newListWatch lists and watches k's resource with the requests the
// generated client makes, decoding each object on its own.
func newListWatch[T any, PT object[T]](k kind[T]) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			body, err := k.request(opts).Do(ctx).Raw()
			if err != nil {
				return nil, err
			}
			var raw rawList
			if err := json.Unmarshal(body, &raw); err != nil {
				return nil, fmt.Errorf("decoding the list of %s: %w", k.resource, err)
			}
			// A list can come in pages; the objects left out are known
			// completely once the last page is in.
			if opts.Continue == "" {
				k.report.startList(k.name)
			}
			items := make([]T, 0, len(raw.Items))
			for _, item := range raw.Items {
				var obj T
				if err := utiljson.Unmarshal(item, PT(&obj)); err != nil {
					k.report.undecodable(k.name, item, err)
					continue
				}
				k.report.decoded(k.name, PT(&obj))
				items = append(items, obj)
			}
			if raw.Continue == "" {
				k.report.endList(k.name)
			}
			return k.list(raw.ListMeta, items), nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			var timeout time.Duration
			if opts.TimeoutSeconds != nil {
				timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
			}
			body, err := k.request(opts).Timeout(timeout).Stream(ctx)
			if err != nil {
				return nil, err
			}
			// A watch that starts with the initial events is a list too.
			initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			if initial {
				k.report.startList(k.name)
			}
			dec := &eventDecoder[T, PT]{kind: k, body: body, json: json.NewDecoder(body), initial: initial}
			return watch.NewStreamWatcher(dec, apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")), nil
		},
	}
}

// request is the GET of k's collection with opts.
func (k kindBase) request(opts metav1.ListOptions) *rest.Request {
	return k.client.Get().
		NamespaceIfScoped(k.namespace, k.namespace != "").
		Resource(k.resource).
		VersionedParams(&opts, scheme.ParameterCodec)
}

// eventDecoder reads a JSON watch stream and skips the events whose object
// does not decode, after reporting them; a typed watch would end there,
// and be restarted from the same resource version only to end again.
type eventDecoder[T any, PT object[T]] struct {
	kind    kind[T]
	body    io.ReadCloser
	json    *json.Decoder
	initial bool // the initial events have not all arrived yet
}

func (d *eventDecoder[T, PT]) Decode() (watch.EventType, runtime.Object, error) {
	for {
		var ev rawEvent
		if err := d.json.Decode(&ev); err != nil {
			return "", nil, err
		}
		switch ev.Type {
		case watch.Error:
			status := &metav1.Status{}
			if err := utiljson.Unmarshal(ev.Object, status); err != nil {
				return "", nil, fmt.Errorf("decoding a watch error of %s: %w", d.kind.resource, err)
			}
			return ev.Type, status, nil
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
			obj := PT(new(T))
			if err := utiljson.Unmarshal(ev.Object, obj); err != nil {
				if ev.Type == watch.Deleted {
					d.kind.report.deleted(d.kind.name, ev.Object)
				} else {
					d.kind.report.undecodable(d.kind.name, ev.Object, err)
				}
				continue
			}
			// As the typed client's decoder does: cached objects carry no
			// apiVersion and kind.
			obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
			switch ev.Type {
			case watch.Deleted:
				d.kind.report.deleted(d.kind.name, ev.Object)
			case watch.Bookmark:
				if d.initial && obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					d.initial = false
					d.kind.report.endList(d.kind.name)
				}
			default:
				d.kind.report.decoded(d.kind.name, obj)
			}
			return ev.Type, obj, nil
		default:
			return "", nil, fmt.Errorf("got invalid watch event type %q for %s", ev.Type, d.kind.resource)
		}
	}
}

func (d *eventDecoder[T, PT]) Close() { _ = d.body.Close() }
