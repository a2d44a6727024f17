package main

// A book of the Bible as the corpus names it.
type book struct {
	abbrev  string // as the bible program prints it ("Ge", "1Sm", "SSol")
	name    string // short name used in chapter headings ("Genesis")
	chapter string // word before the chapter number ("Genesis", "Psalm")
	title   string // the King James Version's title of the book
}

// books lists the 66 books of the King James Version in canonical order.
// The titles are those printed at the head of each book in the 1769 Oxford
// edition that the text follows.
var books = [...]book{
	{"Ge", "Genesis", "Genesis", "The First Book of Moses, Called Genesis"},
	{"Exo", "Exodus", "Exodus", "The Second Book of Moses, Called Exodus"},
	{"Lev", "Leviticus", "Leviticus", "The Third Book of Moses, Called Leviticus"},
	{"Num", "Numbers", "Numbers", "The Fourth Book of Moses, Called Numbers"},
	{"Deu", "Deuteronomy", "Deuteronomy", "The Fifth Book of Moses, Called Deuteronomy"},
	{"Josh", "Joshua", "Joshua", "The Book of Joshua"},
	{"Jdgs", "Judges", "Judges", "The Book of Judges"},
	{"Ruth", "Ruth", "Ruth", "The Book of Ruth"},
	{"1Sm", "1 Samuel", "1 Samuel", "The First Book of Samuel, Otherwise Called the First Book of the Kings"},
	{"2Sm", "2 Samuel", "2 Samuel", "The Second Book of Samuel, Otherwise Called the Second Book of the Kings"},
	{"1Ki", "1 Kings", "1 Kings", "The First Book of the Kings, Commonly Called the Third Book of the Kings"},
	{"2Ki", "2 Kings", "2 Kings", "The Second Book of the Kings, Commonly Called the Fourth Book of the Kings"},
	{"1Chr", "1 Chronicles", "1 Chronicles", "The First Book of the Chronicles"},
	{"2Chr", "2 Chronicles", "2 Chronicles", "The Second Book of the Chronicles"},
	{"Ezra", "Ezra", "Ezra", "Ezra"},
	{"Neh", "Nehemiah", "Nehemiah", "The Book of Nehemiah"},
	{"Est", "Esther", "Esther", "The Book of Esther"},
	{"Job", "Job", "Job", "The Book of Job"},
	{"Psa", "Psalms", "Psalm", "The Book of Psalms"},
	{"Prv", "Proverbs", "Proverbs", "The Proverbs"},
	{"Eccl", "Ecclesiastes", "Ecclesiastes", "Ecclesiastes, or, the Preacher"},
	{"SSol", "Song of Solomon", "Song of Solomon", "The Song of Solomon"},
	{"Isa", "Isaiah", "Isaiah", "The Book of the Prophet Isaiah"},
	{"Jer", "Jeremiah", "Jeremiah", "The Book of the Prophet Jeremiah"},
	{"Lam", "Lamentations", "Lamentations", "The Lamentations of Jeremiah"},
	{"Eze", "Ezekiel", "Ezekiel", "The Book of the Prophet Ezekiel"},
	{"Dan", "Daniel", "Daniel", "The Book of Daniel"},
	{"Hos", "Hosea", "Hosea", "Hosea"},
	{"Joel", "Joel", "Joel", "Joel"},
	{"Amos", "Amos", "Amos", "Amos"},
	{"Obad", "Obadiah", "Obadiah", "Obadiah"},
	{"Jonah", "Jonah", "Jonah", "Jonah"},
	{"Mic", "Micah", "Micah", "Micah"},
	{"Nahum", "Nahum", "Nahum", "Nahum"},
	{"Hab", "Habakkuk", "Habakkuk", "Habakkuk"},
	{"Zep", "Zephaniah", "Zephaniah", "Zephaniah"},
	{"Hag", "Haggai", "Haggai", "Haggai"},
	{"Zec", "Zechariah", "Zechariah", "Zechariah"},
	{"Mal", "Malachi", "Malachi", "Malachi"},
	{"Mat", "Matthew", "Matthew", "The Gospel According to Saint Matthew"},
	{"Mark", "Mark", "Mark", "The Gospel According to Saint Mark"},
	{"Luke", "Luke", "Luke", "The Gospel According to Saint Luke"},
	{"John", "John", "John", "The Gospel According to Saint John"},
	{"Acts", "Acts", "Acts", "The Acts of the Apostles"},
	{"Rom", "Romans", "Romans", "The Epistle of Paul the Apostle to the Romans"},
	{"1Cor", "1 Corinthians", "1 Corinthians", "The First Epistle of Paul the Apostle to the Corinthians"},
	{"2Cor", "2 Corinthians", "2 Corinthians", "The Second Epistle of Paul the Apostle to the Corinthians"},
	{"Gal", "Galatians", "Galatians", "The Epistle of Paul the Apostle to the Galatians"},
	{"Eph", "Ephesians", "Ephesians", "The Epistle of Paul the Apostle to the Ephesians"},
	{"Phi", "Philippians", "Philippians", "The Epistle of Paul the Apostle to the Philippians"},
	{"Col", "Colossians", "Colossians", "The Epistle of Paul the Apostle to the Colossians"},
	{"1Th", "1 Thessalonians", "1 Thessalonians", "The First Epistle of Paul the Apostle to the Thessalonians"},
	{"2Th", "2 Thessalonians", "2 Thessalonians", "The Second Epistle of Paul the Apostle to the Thessalonians"},
	{"1Tim", "1 Timothy", "1 Timothy", "The First Epistle of Paul the Apostle to Timothy"},
	{"2Tim", "2 Timothy", "2 Timothy", "The Second Epistle of Paul the Apostle to Timothy"},
	{"Titus", "Titus", "Titus", "The Epistle of Paul to Titus"},
	{"Phmn", "Philemon", "Philemon", "The Epistle of Paul to Philemon"},
	{"Heb", "Hebrews", "Hebrews", "The Epistle of Paul the Apostle to the Hebrews"},
	{"Jas", "James", "James", "The General Epistle of James"},
	{"1Pet", "1 Peter", "1 Peter", "The First Epistle General of Peter"},
	{"2Pet", "2 Peter", "2 Peter", "The Second Epistle General of Peter"},
	{"1Jn", "1 John", "1 John", "The First Epistle General of John"},
	{"2Jn", "2 John", "2 John", "The Second Epistle of John"},
	{"3Jn", "3 John", "3 John", "The Third Epistle of John"},
	{"Jude", "Jude", "Jude", "The General Epistle of Jude"},
	{"Rev", "Revelation", "Revelation", "The Revelation of Saint John the Divine"},
}

// otBooks is the number of Old Testament books; the rest are the New
// Testament's.
const otBooks = 39

// heldOut reports whether the book of the given short name goes to
// heldout.txt. The held-out books are about 5% of the Bible's text, chosen
// by hand to cover narrative (Ruth, Esther, Jonah), wisdom (Ecclesiastes),
// prophecy (Joel), a gospel (Mark) and epistles (Galatians, James, Jude).
// No psalm is held out.
func heldOut(name string) bool {
	switch name {
	case "Ruth", "Esther", "Ecclesiastes", "Joel", "Jonah", "Mark", "Galatians", "James", "Jude":
		return true
	}
	return false
}
