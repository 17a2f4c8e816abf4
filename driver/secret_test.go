package driver_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

func TestMergeSecrets(t *testing.T) {
	userData := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "user-data"},
		Data:       map[string][]byte{"userData": []byte("#cloud-config"), "token": []byte("stale")},
	}
	credentials := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "credentials"},
		Data:       map[string][]byte{"token": []byte("fresh"), "region": []byte("eu")},
	}
	tests := []struct {
		name                string
		secret, credentials *corev1.Secret
		want                map[string][]byte
	}{
		{"both nil", nil, nil, map[string][]byte{}},
		{"only secret", userData, nil, map[string][]byte{"userData": []byte("#cloud-config"), "token": []byte("stale")}},
		{"only credentials", nil, credentials, map[string][]byte{"token": []byte("fresh"), "region": []byte("eu")}},
		{"credentials win", userData, credentials, map[string][]byte{
			"userData": []byte("#cloud-config"), "token": []byte("fresh"), "region": []byte("eu"),
		}},
		{
			"stringData folded in and wins within its secret",
			&corev1.Secret{Data: map[string][]byte{"userData": []byte("old")}, StringData: map[string]string{"userData": "new"}},
			&corev1.Secret{StringData: map[string]string{"token": "t"}},
			map[string][]byte{"userData": []byte("new"), "token": []byte("t")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := driver.MergeSecrets(tt.secret, tt.credentials)
			if diff := cmp.Diff(&corev1.Secret{Data: tt.want}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeSecretsCopiesValues(t *testing.T) {
	in := &corev1.Secret{Data: map[string][]byte{"userData": []byte("abc")}}
	out := driver.MergeSecrets(in, nil)
	out.Data["userData"][0] = 'X'
	out.Data["new"] = nil
	if diff := cmp.Diff(map[string][]byte{"userData": []byte("abc")}, in.Data); diff != "" {
		t.Errorf("input changed through the merged secret (-want +got):\n%s", diff)
	}
}

func TestReadClassSecret(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = indexer.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ud", Namespace: "ns"}, Data: map[string][]byte{"userData": []byte("x")}})
	_ = indexer.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "shared"}, Data: map[string][]byte{"token": []byte("t")}})
	lister := corelisters.NewSecretLister(indexer)
	class := func(refs ...*corev1.SecretReference) *v1alpha1.MachineClass {
		c := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
		if len(refs) > 0 {
			c.SecretRef = refs[0]
		}
		if len(refs) > 1 {
			c.CredentialsSecretRef = refs[1]
		}
		return c
	}
	got, err := driver.ReadClassSecret(lister, class(&corev1.SecretReference{Name: "ud"}, &corev1.SecretReference{Name: "creds", Namespace: "shared"}))
	if err != nil || string(got.Data["userData"]) != "x" || string(got.Data["token"]) != "t" {
		t.Errorf("merged %v, %v; want both secrets' data (the first in the class's namespace)", got, err)
	}
	if _, err := driver.ReadClassSecret(lister, class()); err == nil || err.Error() != `MachineClass "c" references no secret` {
		t.Errorf("no references: %v", err)
	}
	for _, tt := range []struct {
		name string
		refs []*corev1.SecretReference
		want string
	}{
		{"missing in the class's namespace", []*corev1.SecretReference{{Name: "gone"}},
			`Secret ns/gone referenced by MachineClass "c" not found`},
		{"missing, namespace named as the class's", []*corev1.SecretReference{{Name: "gone", Namespace: "ns"}},
			`Secret ns/gone referenced by MachineClass "c" not found`},
		{"missing in another namespace", []*corev1.SecretReference{{Name: "ud"}, {Name: "creds", Namespace: "elsewhere"}},
			`Secret elsewhere/creds referenced by MachineClass "c" not found: namespace "elsewhere" is outside the MachineClass's namespace "ns", ` +
				`and a manager restricted to one namespace reads Secrets only there; put the Secret in "ns"`},
		{"secretRef in another namespace", []*corev1.SecretReference{{Name: "ud", Namespace: "shared"}},
			`Secret shared/ud referenced by MachineClass "c" not found: namespace "shared" is outside the MachineClass's namespace "ns", ` +
				`and a manager restricted to one namespace reads Secrets only there; put the Secret in "ns"`},
	} {
		if _, err := driver.ReadClassSecret(lister, class(tt.refs...)); err == nil || err.Error() != tt.want {
			t.Errorf("%s: error %v\nwant %s", tt.name, err, tt.want)
		}
	}
}
