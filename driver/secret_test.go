package driver_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
