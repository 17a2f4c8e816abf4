package mcmdriver_test

import (
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// filler sets every exported field of a value, recursively, to a value
// that differs from its zero value and from every other field's, so that a
// conversion that drops or swaps a field shows in a comparison. It knows
// the few API types whose wire form is not their Go structure.
type filler struct{ n int }

func (f *filler) next() int { f.n++; return f.n }

func (f *filler) fill(v reflect.Value) {
	switch v.Addr().Interface().(type) {
	case *metav1.Time:
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, f.next(), 0, time.UTC))))
		return
	case *metav1.Duration:
		v.Set(reflect.ValueOf(metav1.Duration{Duration: time.Duration(f.next()) * time.Second}))
		return
	case *resource.Quantity:
		v.Set(reflect.ValueOf(resource.MustParse(fmt.Sprint(f.next()))))
		return
	case *runtime.RawExtension:
		v.Set(reflect.ValueOf(runtime.RawExtension{Raw: fmt.Appendf(nil, `{"field%d":"value"}`, f.next())}))
		return
	case *metav1.FieldsV1:
		v.Set(reflect.ValueOf(metav1.FieldsV1{Raw: fmt.Appendf(nil, `{"f:field%d":{}}`, f.next())}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", v.Type().Name(), f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.next()))
	case reflect.Uint8:
		v.SetUint(uint64(f.next() % 256))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		f.fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		f.fill(k)
		f.fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Interface:
		// runtime.Object in RawExtension is handled above; no other
		// interface field is part of the API types.
	default:
		panic(fmt.Sprintf("filler: unhandled kind %s of %s", v.Kind(), v.Type()))
	}
}

// filled returns a T with every field set.
func filled[T any]() *T {
	out := new(T)
	(&filler{}).fill(reflect.ValueOf(out).Elem())
	return out
}
