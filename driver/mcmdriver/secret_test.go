package mcmdriver_test

import (
	"testing"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
)

// TestSecretMergedAsMCM reads a class's secretRef and credentialsSecretRef
// the way our machine controller does (driver.ReadClassSecret) and checks
// that the MCM driver behind the adapter receives what MCM's provider app
// hands it: a Secret holding only Data, the secretRef's keys overlaid by
// the credentialsSecretRef's.
func TestSecretMergedAsMCM(t *testing.T) {
	userData := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-data", Namespace: "ns"},
		Data: map[string][]byte{"userData": []byte("#cloud-config"), "token": []byte("stale")}}
	credentials := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials", Namespace: "ns"},
		Data: map[string][]byte{"token": []byte("fresh"), "region": []byte("eu-1")}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range []*corev1.Secret{userData, credentials} {
		if err := indexer.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	lister := corelisters.NewSecretLister(indexer)
	ref := func(name string) *corev1.SecretReference { return &corev1.SecretReference{Name: name, Namespace: "ns"} }

	for _, tc := range []struct {
		name                   string
		secretRef, credentials *corev1.SecretReference
		want                   map[string][]byte
	}{
		{"secretRef only", ref("user-data"), nil,
			map[string][]byte{"userData": []byte("#cloud-config"), "token": []byte("stale")}},
		{"credentialsSecretRef only", nil, ref("credentials"),
			map[string][]byte{"token": []byte("fresh"), "region": []byte("eu-1")}},
		{"both: the credentials win", ref("user-data"), ref("credentials"),
			map[string][]byte{"userData": []byte("#cloud-config"), "token": []byte("fresh"), "region": []byte("eu-1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class := testClass("c", 0)
			class.Namespace, class.SecretRef, class.CredentialsSecretRef = "ns", tc.secretRef, tc.credentials
			secret, err := driver.ReadClassSecret(lister, class)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{createResp: &mcm.CreateMachineResponse{ProviderID: "p"}}
			if _, err := mcmdriver.New(rec).CreateMachine(t.Context(), &driver.CreateMachineRequest{
				Machine: filled[v1alpha1.Machine](), MachineClass: class, Secret: secret,
			}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&corev1.Secret{Data: tc.want}, rec.create.Secret); diff != "" {
				t.Errorf("secret the MCM driver received (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.secretRef, rec.create.MachineClass.SecretRef); diff != "" {
				t.Errorf("secretRef (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.credentials, rec.create.MachineClass.CredentialsSecretRef); diff != "" {
				t.Errorf("credentialsSecretRef (-want +got):\n%s", diff)
			}
		})
	}
}
