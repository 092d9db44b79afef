package seed

// Categories returns the names of the mix's categories, in a fixed order,
// for the tests.
func Categories() []string {
	names := make([]string, len(categories))
	for i, c := range categories {
		names[i] = c.name
	}
	return names
}
