package src

// Greet returns a greeting.
func Greet(name string) string {
	// TODO: localise
	return "Hello, " + name
}
