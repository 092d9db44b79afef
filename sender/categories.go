package sender

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// TypeCategory is one message type's Meta category and where it comes
// from: "kind" for the shipped kinds (statemachine declares them),
// "declared" for a type the operator declared (DeclareCategory).
type TypeCategory struct {
	Type       string      `json:"type"`
	Category   sm.Category `json:"category"`
	Source     string      `json:"source"`
	DeclaredAt *time.Time  `json:"declared_at,omitempty"`
	DeclaredBy string      `json:"declared_by,omitempty"`
}

// ErrKindCategory is returned by DeclareCategory for a shipped kind: its
// category is the project's, not the operator's.
var ErrKindCategory = errors.New("a shipped message kind's category is fixed by the project (statemachine)")

// ErrBadCategory is wrapped by DeclareCategory's errors for a category or
// a type that breaks the rule.
var ErrBadCategory = errors.New("bad category declaration")

// CategoryOf is the category every door holds a message of type t to: the
// kind's, else the operator's declared one (from declared), else
// marketing. A marketing message never goes to a user who opted out.
func CategoryOf(t string, declared map[string]sm.Category) sm.Category {
	if k, ok := sm.KindOf(sm.Message(t)); ok {
		return k.Category
	}
	if c, ok := declared[t]; ok {
		return c
	}
	return sm.CategoryMarketing
}

// DeclareCategory records that messages of type t are of category c
// (engagementctl categories set): every door reads it from then on.
func DeclareCategory(ctx context.Context, q Querier, t string, c sm.Category, by string) error {
	if _, ok := sm.KindOf(sm.Message(t)); ok {
		return fmt.Errorf("%s: %w", t, ErrKindCategory)
	}
	if !c.Valid() {
		return fmt.Errorf("%w: category %q: want one of %v", ErrBadCategory, c, sm.Categories())
	}
	if len(t) > MaxTypeLen || !typeRE.MatchString(t) {
		return fmt.Errorf("%w: a message type is 1 to %d lowercase letters, digits, _ . and -, starting with a letter", ErrBadCategory, MaxTypeLen)
	}
	_, err := categoryDeclareQuery.Exec(ctx, q, categoryDeclareArgs{MessageType: t, Category: string(c), DeclaredBy: by})
	return err
}

// ForgetCategory drops the operator's category for type t: it is
// marketing again. It reports whether there was one.
func ForgetCategory(ctx context.Context, q Querier, t string) (bool, error) {
	if _, ok := sm.KindOf(sm.Message(t)); ok {
		return false, fmt.Errorf("%s: %w", t, ErrKindCategory)
	}
	row, err := categoryForgetQuery.One(ctx, q, categoryForgetArgs{MessageType: t})
	return row.Forgotten, err
}

// Categories lists the shipped kinds' categories, then the declared ones,
// by type.
func Categories(ctx context.Context, q Querier) ([]TypeCategory, error) {
	var out []TypeCategory
	for _, k := range sm.Kinds() {
		out = append(out, TypeCategory{Type: string(k.Message), Category: k.Category, Source: "kind"})
	}
	rows, err := categoriesQuery.All(ctx, q, sqlfile.None{})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		at := r.DeclaredAt
		out = append(out, TypeCategory{Type: r.MessageType, Category: sm.Category(r.Category), Source: "declared",
			DeclaredAt: &at, DeclaredBy: r.DeclaredBy})
	}
	return out, nil
}
