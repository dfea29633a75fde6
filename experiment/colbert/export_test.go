package colbert

// TinyRecipe is tinyRecipe for the package's external tests (search_test.go).
var TinyRecipe = tinyRecipe
