package jsondiff_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/jsondiff"
)

func TestDiff_NamesEachScalarThatDiffers(t *testing.T) {
	t.Parallel()
	before := `{"id":"in_1","object":"invoice","status":"open","amount_paid":0,"metadata":{"order":"42","old":"x"},
		"lines":{"data":[{"amount":2000},{"amount":500}]},"customer":"cus_1","discount":null}`
	after := `{"id":"in_1","object":"invoice","status":"paid","amount_paid":2000,"metadata":{"order":"42","new":"y"},
		"lines":{"data":[{"amount":2500}]},"customer":"cus_1","discount":{"coupon":"SAVE","percent_off":10}}`
	r, err := jsondiff.Diff([]byte(before), []byte(after))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range r.Changes {
		got = append(got, fmt.Sprintf("%s %s %s→%s", c.Kind, c.Path, c.Before, c.After))
	}
	want := []string{
		"changed amount_paid 0→2000",
		`changed discount null→{"coupon":"SAVE","percent_off":10}`,
		"changed lines.data[0].amount 2000→2500",
		"removed lines.data[1].amount 500→",
		`added metadata.new →"y"`,
		`removed metadata.old "x"→`,
		`changed status "open"→"paid"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || r.Truncated {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDiff_SameObjectHasNoChangeAndLargeNumbersStayExact(t *testing.T) {
	t.Parallel()
	o := `{"a":{"b":[1,2,{"c":true}]},"n":12345678901234567890}`
	if r, err := jsondiff.Diff([]byte(o), []byte(o)); err != nil || len(r.Changes) != 0 {
		t.Errorf("got %+v, %v", r, err)
	}
	r, _ := jsondiff.Diff([]byte(`{"n":12345678901234567890}`), []byte(`{"n":12345678901234567891}`))
	if len(r.Changes) != 1 {
		t.Errorf("large numbers compared inexactly: %+v", r)
	}
}

func TestDiff_BoundsTheChanges(t *testing.T) {
	t.Parallel()
	var b, a strings.Builder
	b.WriteString("{")
	a.WriteString("{")
	for i := range jsondiff.MaxChanges + 50 {
		if i > 0 {
			b.WriteString(",")
			a.WriteString(",")
		}
		fmt.Fprintf(&b, `"f%d":%d`, i, i)
		fmt.Fprintf(&a, `"f%d":%d`, i, i+1)
	}
	b.WriteString("}")
	a.WriteString("}")
	r, err := jsondiff.Diff([]byte(b.String()), []byte(a.String()))
	if err != nil || len(r.Changes) != jsondiff.MaxChanges || !r.Truncated {
		t.Errorf("got %d changes, truncated %v, %v", len(r.Changes), r.Truncated, err)
	}
	if _, err := jsondiff.Diff([]byte(`{`), []byte(`{}`)); err == nil {
		t.Error("invalid JSON compared")
	}
}
