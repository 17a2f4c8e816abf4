package apitime

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Of is t as the API server stores it: in UTC, truncated to the second.
func Of(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
