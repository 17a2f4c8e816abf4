package tolerant

import (
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	machinegroup "github.com/mcmkit/mcm/client/informers/externalversions/machine"
	informers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	listers "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
)

// Options configure how undecodable objects are reported. The zero value
// reports nothing but still keeps them from blocking the informers.
type Options struct {
	// Recorder records a Warning event on each undecodable object; nil
	// records none.
	Recorder record.EventRecorder
	// Registerer receives mcm_undecodable_objects; nil means no metric.
	Registerer prometheus.Registerer
	// Logger logs each undecodable object once per version; the zero value
	// discards.
	Logger logr.Logger
}

// NewSharedInformerFactory returns the generated informer factory for
// client, restricted to namespace ("" for all) with the given resync
// period, whose informers for the four machine kinds list and watch
// tolerantly (see the package documentation). As with the generated
// factory, an informer is created, and started by Start, only once
// something asks for it. It fails only if opts' Registerer already holds
// an incompatible mcm_undecodable_objects.
func NewSharedInformerFactory(client versioned.Interface, namespace string, resync time.Duration, opts Options) (externalversions.SharedInformerFactory, error) {
	generated := externalversions.NewSharedInformerFactoryWithOptions(client, resync, externalversions.WithNamespace(namespace))
	rc := client.MachineV1alpha1().RESTClient()
	if c, ok := rc.(*rest.RESTClient); rc == nil || (ok && c == nil) {
		return generated, nil // a fake clientset: nothing to decode
	}
	rep, err := newReporter(opts)
	if err != nil {
		return nil, err
	}
	kindOf := func(resource, name string) kindBase {
		return kindBase{client: rc, namespace: namespace, resource: resource, name: name, report: rep}
	}
	f := &factory{SharedInformerFactory: generated}
	f.version = version{
		machines: newInformer[v1alpha1.Machine, *v1alpha1.Machine](generated, kindOf("machines", "Machine"),
			func(meta metav1.ListMeta, items []v1alpha1.Machine) runtime.Object {
				return &v1alpha1.MachineList{ListMeta: meta, Items: items}
			},
			func(i cache.SharedIndexInformer) informers.MachineIndexInformer {
				return cache.NewTypedSharedIndexInformer[*v1alpha1.Machine](i)
			}, listers.NewMachineLister),
		sets: newInformer[v1alpha1.MachineSet, *v1alpha1.MachineSet](generated, kindOf("machinesets", "MachineSet"),
			func(meta metav1.ListMeta, items []v1alpha1.MachineSet) runtime.Object {
				return &v1alpha1.MachineSetList{ListMeta: meta, Items: items}
			},
			func(i cache.SharedIndexInformer) informers.MachineSetIndexInformer {
				return cache.NewTypedSharedIndexInformer[*v1alpha1.MachineSet](i)
			}, listers.NewMachineSetLister),
		deployments: newInformer[v1alpha1.MachineDeployment, *v1alpha1.MachineDeployment](generated, kindOf("machinedeployments", "MachineDeployment"),
			func(meta metav1.ListMeta, items []v1alpha1.MachineDeployment) runtime.Object {
				return &v1alpha1.MachineDeploymentList{ListMeta: meta, Items: items}
			},
			func(i cache.SharedIndexInformer) informers.MachineDeploymentIndexInformer {
				return cache.NewTypedSharedIndexInformer[*v1alpha1.MachineDeployment](i)
			}, listers.NewMachineDeploymentLister),
		classes: newInformer[v1alpha1.MachineClass, *v1alpha1.MachineClass](generated, kindOf("machineclasses", "MachineClass"),
			func(meta metav1.ListMeta, items []v1alpha1.MachineClass) runtime.Object {
				return &v1alpha1.MachineClassList{ListMeta: meta, Items: items}
			},
			func(i cache.SharedIndexInformer) informers.MachineClassIndexInformer {
				return cache.NewTypedSharedIndexInformer[*v1alpha1.MachineClass](i)
			}, listers.NewMachineClassLister),
	}
	return f, nil
}

// factory is the generated factory with tolerant informers for the machine
// kinds. Their informers are registered with the generated factory (its
// InformerFor), so that Start, WaitForCacheSync and Shutdown cover them.
type factory struct {
	externalversions.SharedInformerFactory
	version version
}

func (f *factory) Machine() machinegroup.Interface { return group{f.version} }

type group struct{ version version }

func (g group) V1alpha1() informers.Interface { return g.version }

type version struct {
	machines    informer[v1alpha1.Machine, *v1alpha1.Machine, informers.MachineIndexInformer, listers.MachineLister]
	sets        informer[v1alpha1.MachineSet, *v1alpha1.MachineSet, informers.MachineSetIndexInformer, listers.MachineSetLister]
	deployments informer[v1alpha1.MachineDeployment, *v1alpha1.MachineDeployment, informers.MachineDeploymentIndexInformer, listers.MachineDeploymentLister]
	classes     informer[v1alpha1.MachineClass, *v1alpha1.MachineClass, informers.MachineClassIndexInformer, listers.MachineClassLister]
}

func (v version) Machines() informers.TypedMachineInformer                     { return v.machines }
func (v version) MachineSets() informers.TypedMachineSetInformer               { return v.sets }
func (v version) MachineDeployments() informers.TypedMachineDeploymentInformer { return v.deployments }
func (v version) MachineClasses() informers.TypedMachineClassInformer          { return v.classes }

// informer is the tolerant informer of one kind: T the kind, PT its
// pointer, TI the generated typed informer and L the generated lister.
type informer[T any, PT object[T], TI any, L any] struct {
	factory externalversions.SharedInformerFactory
	kind    kind[T]
	typed   func(cache.SharedIndexInformer) TI
	lister  func(cache.Indexer) L
}

// newInformer is the tolerant informer of kind T: list makes its list
// type, typed and lister its generated typed informer and lister.
func newInformer[T any, PT object[T], TI any, L any](f externalversions.SharedInformerFactory, base kindBase,
	list func(metav1.ListMeta, []T) runtime.Object, typed func(cache.SharedIndexInformer) TI, lister func(cache.Indexer) L,
) informer[T, PT, TI, L] {
	return informer[T, PT, TI, L]{factory: f, kind: kind[T]{kindBase: base, list: list}, typed: typed, lister: lister}
}

// Informer returns the factory's informer of the kind, creating it with
// the indexer the generated informers have on first use.
func (i informer[T, PT, TI, L]) Informer() cache.SharedIndexInformer {
	return i.factory.InformerFor(PT(new(T)), func(_ versioned.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(newListWatch[T, PT](i.kind), PT(new(T)), resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
}

func (i informer[T, PT, TI, L]) TypedInformer() TI { return i.typed(i.Informer()) }

func (i informer[T, PT, TI, L]) Lister() L { return i.lister(i.Informer().GetIndexer()) }

// object is a pointer to one of the machine kinds.
type object[T any] interface {
	*T
	runtime.Object
	metav1.Object
}
