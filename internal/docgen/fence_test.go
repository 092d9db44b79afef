package docgen

import "testing"

func TestFenceIndented(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", ""},
		{"prose only", "one\ntwo", "one\ntwo"},
		{"a list between paragraphs", "Steps:\n  a  first\n  b  second\nThen more.",
			"Steps:\n\n```\n  a  first\n  b  second\n```\n\nThen more."},
		{"a list after a blank line", "Steps:\n\n  a  first\n\nMore.",
			"Steps:\n\n```\n  a  first\n```\n\nMore."},
		{"a list at the end", "Steps:\n  a  first", "Steps:\n\n```\n  a  first\n```"},
	} {
		if got := fenceIndented(tc.in); got != tc.want {
			t.Errorf("%s: fenceIndented(%q)\n got %q\nwant %q", tc.name, tc.in, got, tc.want)
		}
	}
}
