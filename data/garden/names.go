package garden

import (
	"math/rand/v2"
	"strings"
)

// Name pools. A world uses the first Config.FirstNames (Towns, Plants, Animals) entries of a
// seeded shuffle of each pool. Every word is one token, and the pools are pairwise disjoint so
// that an answer names one value of one type.
var (
	firstNamePool = []string{
		"Tova", "Ines", "Arlo", "Bram", "Cleo", "Dagny", "Edda", "Finn", "Greta", "Hugo",
		"Ilse", "Joss", "Kai", "Lena", "Milo", "Nora", "Otto", "Pia", "Rune", "Sven",
		"Talia", "Ulla", "Vera", "Wim", "Yara", "Zeno", "Ada", "Bruno", "Cora", "Dino",
		"Elin", "Femke", "Gus", "Hilde", "Ivo", "Juno", "Kees", "Lotte", "Mira", "Nils",
	}
	townPool = []string{
		"Ashby", "Brindle", "Corwen", "Dunmore", "Elmstead", "Fairholt", "Glenrock", "Harrowby",
		"Ivybridge", "Kelso", "Larkhill", "Marlow", "Netherby", "Oakhurst", "Pendle", "Quarrow",
		"Redwick", "Stowe", "Thornbury", "Ulverston", "Wexham", "Yelverton", "Alderney", "Bexley",
		"Caldbeck", "Dorrington", "Eskdale", "Fenwick", "Grasmere", "Hexham", "Inverby", "Keswick",
		"Lydford", "Millbrook", "Norwick", "Ottery", "Penrith", "Rydal", "Selby", "Tarvin",
	}
	plantPool = []string{
		"fig", "rose", "tulip", "basil", "mint", "sage", "thyme", "fennel", "leek", "kale",
		"bean", "pea", "onion", "garlic", "carrot", "radish", "lettuce", "squash", "pumpkin", "melon",
		"tomato", "potato", "pepper", "cabbage", "spinach", "celery", "parsley", "dill", "chive", "lavender",
		"daisy", "lily", "iris", "poppy", "orchid", "fern", "ivy", "heather", "clover", "violet",
		"dahlia", "peony", "aster", "lupin", "marigold", "sunflower", "crocus", "hyacinth", "jasmine", "magnolia",
		"camellia", "olive", "lemon", "apple", "pear", "plum", "cherry", "quince", "apricot", "grape",
	}
	animalPool = []string{
		"dog", "cat", "goat", "hen", "duck", "goose", "sheep", "pig", "rabbit", "pony",
		"donkey", "cow", "ferret", "parrot", "tortoise", "hamster", "llama", "alpaca", "peacock", "turkey",
		"canary", "quail", "hedgehog", "owl",
	}
)

// Surnames are 1-3 consonant-vowel syllables over these letters, capitalised ("Tova", "Zerimo").
const (
	surnameConsonants = "bdfgklmnprstvz"
	surnameVowels     = "aeiou"
	maxGardeners      = 100000 // far below the 343,070 possible surnames, so generation ends quickly
)

// surnameSyllableWeights are the probabilities of 1, 2 and 3 syllables: two-letter surnames are
// few (70 exist) and read oddly, so they are rare.
var surnameSyllableWeights = [3]float64{0.1, 0.5, 0.4}

// englishWords are common English words (and a few place names) that fit the surname pattern;
// a generated surname equal to one of them, to a pool word or to a template word is rejected.
var englishWords = strings.Fields(`
	be bi bo da de di do fa fe go ka la le li lo ma me mi mo mu na ne no nu pa pe pi po re so
	ta te ti to
	babe bake bale bane base bide bike bile bite bode bone bore data date dime dine dire dive
	dole dome done dose dote dune fade fake fame fare fate fete fife file fine fire five fume
	fuse gale game gape gate gave gaze gene gibe gone gore kale kite kilo lade lake lame lane
	late lava laze lime line live lobe lode lone lore lose love lube lure lute made make male
	mane mare mate maze mere mete mike mile mime mine mire mite mode mole mope more mote move
	mule muse mute name nape node none nope nose note nuke pale pane pare pate pave pike pile
	pine pipe poke pole pope pore pose puke pure rake rate rave raze ride rife rise rite robe
	rode role rope rose rote rube rude rule ruse safe sage sake sale same sane sate save side
	sine sire site size sole some sore sure take tale tame tape tide tile time tine tire toke
	tole tome tone tope tote tube tune vale vane vase vibe vile vine vole vote zone memo menu
	mini mama papa nana sofa soda tuna tuba toga tofu solo silo polo pita puma pupa gala diva
	visa veto zero demo beta meta dodo sumo lima mali bali peru togo rome kobe tutu lulu
	banana potato tomato domino gelato kimono bikini safari salami minute divide devote reside
	refuse revise remove relate retire derive define refine salute dilute delete debate donate
	negate sedate rotate mature nature future manure gazebo legume volume resume pirate parade
	sonata tirade morale senate famine genome nevada dakota denali`)

// rejectedSurnames are the lower-cased words no surname may equal.
func rejectedSurnames() map[string]bool {
	bad := make(map[string]bool)
	for _, pool := range [][]string{englishWords, firstNamePool, townPool, plantPool, animalPool, templateWords} {
		for _, w := range pool {
			bad[strings.ToLower(w)] = true
		}
	}
	return bad
}

// surnames returns n distinct invented surnames.
func surnames(rng *rand.Rand, n int) []string {
	bad := rejectedSurnames()
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	var b strings.Builder
	for len(out) < n {
		syl := 3
		u := rng.Float64()
		for i, acc := 0, 0.0; i < 3; i++ {
			if acc += surnameSyllableWeights[i]; u < acc {
				syl = i + 1
				break
			}
		}
		b.Reset()
		for range syl {
			b.WriteByte(surnameConsonants[rng.IntN(len(surnameConsonants))])
			b.WriteByte(surnameVowels[rng.IntN(len(surnameVowels))])
		}
		s := b.String()
		if bad[s] || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, strings.ToUpper(s[:1])+s[1:])
	}
	return out
}

// pick returns the first n words of a seeded shuffle of pool (pool is not modified).
func pick(rng *rand.Rand, pool []string, n int) []string {
	p := append([]string(nil), pool...)
	rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p[:n]
}
