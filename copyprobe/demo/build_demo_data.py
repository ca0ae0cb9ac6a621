"""Builds copyprobe/demo/demo.jsonl: famous public-domain passages (label 1, almost
certainly in any model's pretraining data) against passages written fresh for copyprobe
in the same styles (label 0, which did not exist before 2026). Run from the repo root:
python copyprobe/demo/build_demo_data.py"""

import json
from pathlib import Path

FAMOUS = {
    "kjv-genesis": [
        "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the light from the darkness. And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day.",
        "And God said, Let us make man in our image, after our likeness: and let them have dominion over the fish of the sea, and over the fowl of the air, and over the cattle, and over all the earth, and over every creeping thing that creepeth upon the earth. So God created man in his own image, in the image of God created he him; male and female created he them.",
        "And God blessed them, and God said unto them, Be fruitful, and multiply, and replenish the earth, and subdue it: and have dominion over the fish of the sea, and over the fowl of the air, and over every living thing that moveth upon the earth.",
    ],
    "kjv-wisdom": [
        "The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me beside the still waters. He restoreth my soul: he leadeth me in the paths of righteousness for his name's sake. Yea, though I walk through the valley of the shadow of death, I will fear no evil: for thou art with me; thy rod and thy staff they comfort me.",
        "To every thing there is a season, and a time to every purpose under the heaven: A time to be born, and a time to die; a time to plant, and a time to pluck up that which is planted; A time to kill, and a time to heal; a time to break down, and a time to build up; A time to weep, and a time to laugh; a time to mourn, and a time to dance.",
        "Charity suffereth long, and is kind; charity envieth not; charity vaunteth not itself, is not puffed up, Doth not behave itself unseemly, seeketh not her own, is not easily provoked, thinketh no evil; Rejoiceth not in iniquity, but rejoiceth in the truth; Beareth all things, believeth all things, hopeth all things, endureth all things.",
    ],
    "kjv-gospels": [
        "In the beginning was the Word, and the Word was with God, and the Word was God. The same was in the beginning with God. All things were made by him; and without him was not any thing made that was made. In him was life; and the life was the light of men. And the light shineth in darkness; and the darkness comprehended it not.",
        "Our Father which art in heaven, Hallowed be thy name. Thy kingdom come. Thy will be done in earth, as it is in heaven. Give us this day our daily bread. And forgive us our debts, as we forgive our debtors. And lead us not into temptation, but deliver us from evil: For thine is the kingdom, and the power, and the glory, for ever. Amen.",
        "For God so loved the world, that he gave his only begotten Son, that whosoever believeth in him should not perish, but have everlasting life. For God sent not his Son into the world to condemn the world; but that the world through him might be saved.",
    ],
    "declaration-of-independence": [
        "When in the Course of human events, it becomes necessary for one people to dissolve the political bands which have connected them with another, and to assume among the powers of the earth, the separate and equal station to which the Laws of Nature and of Nature's God entitle them, a decent respect to the opinions of mankind requires that they should declare the causes which impel them to the separation.",
        "We hold these truths to be self-evident, that all men are created equal, that they are endowed by their Creator with certain unalienable Rights, that among these are Life, Liberty and the pursuit of Happiness. That to secure these rights, Governments are instituted among Men, deriving their just powers from the consent of the governed.",
        "Prudence, indeed, will dictate that Governments long established should not be changed for light and transient causes; and accordingly all experience hath shewn, that mankind are more disposed to suffer, while evils are sufferable, than to right themselves by abolishing the forms to which they are accustomed.",
    ],
    "us-founding-speeches": [
        "We the People of the United States, in Order to form a more perfect Union, establish Justice, insure domestic Tranquility, provide for the common defence, promote the general Welfare, and secure the Blessings of Liberty to ourselves and our Posterity, do ordain and establish this Constitution for the United States of America.",
        "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in Liberty, and dedicated to the proposition that all men are created equal. Now we are engaged in a great civil war, testing whether that nation, or any nation so conceived and so dedicated, can long endure.",
        "It is rather for us to be here dedicated to the great task remaining before us, that from these honored dead we take increased devotion to that cause for which they gave the last full measure of devotion, that we here highly resolve that these dead shall not have died in vain, and that government of the people, by the people, for the people, shall not perish from the earth.",
    ],
    "novel-openings-a": [
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. However little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered the rightful property of some one or other of their daughters.",
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had everything before us, we had nothing before us.",
        "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of the world. It is a way I have of driving off the spleen and regulating the circulation.",
    ],
    "novel-openings-b": [
        "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: once or twice she had peeped into the book her sister was reading, but it had no pictures or conversations in it, and what is the use of a book, thought Alice, without pictures or conversations?",
        "There was no possibility of taking a walk that day. We had been wandering, indeed, in the leafless shrubbery an hour in the morning; but since dinner the cold winter wind had brought with it clouds so sombre, and a rain so penetrating, that further out-door exercise was now out of the question.",
        "Happy families are all alike; every unhappy family is unhappy in its own way. Everything was in confusion in the Oblonskys' house. The wife had discovered that the husband was carrying on an intrigue with a French girl, who had been a governess in their family, and she had announced to her husband that she could not go on living in the same house with him.",
    ],
    "shakespeare": [
        "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer The slings and arrows of outrageous fortune, Or to take arms against a sea of troubles And by opposing end them. To die: to sleep; No more; and by a sleep to say we end The heart-ache and the thousand natural shocks That flesh is heir to.",
        "To-morrow, and to-morrow, and to-morrow, Creeps in this petty pace from day to day To the last syllable of recorded time, And all our yesterdays have lighted fools The way to dusty death. Out, out, brief candle! Life's but a walking shadow, a poor player That struts and frets his hour upon the stage And then is heard no more.",
        "Shall I compare thee to a summer's day? Thou art more lovely and more temperate: Rough winds do shake the darling buds of May, And summer's lease hath all too short a date: Sometime too hot the eye of heaven shines, And often is his gold complexion dimm'd; And every fair from fair sometime declines.",
    ],
}

# Written for copyprobe in November 2026, imitating the styles above. They cannot be in
# any model's training data that predates them.
FRESH = {
    "fresh-scripture-a": [
        "And it came to pass in the days of the lamp makers, that a wind arose out of the south and troubled the vineyards of Hareth. And the elders gathered at the gate of the city, and they said one to another, Who shall mend the walls before the season of figs? And there was none among them that answered, for their hearts were heavy with the matter of the salt.",
        "Then spake the keeper of the granaries unto the people, saying, Measure ye the barley by the small vessel and not by the great, lest the children of the river go hungry in the ninth month. And the people murmured, yet they did according to his word; and the barley sufficed them until the rains returned upon the hills of Ozem.",
        "And the seventh lamp was kindled upon the high place, and the smoke thereof went up as a pillar of wool. And the watchmen beheld it from afar and were afraid, and they covered their faces with their mantles, and they said, Surely the stranger who sold us copper hath spoken truly, and the year of the broken wheel is upon us.",
    ],
    "fresh-scripture-b": [
        "The patient hand shall gather olives in the dry year, but the hasty hand shall find the branches bare. A quiet answer turneth the shepherd from his anger; but a loud reply scattereth the flock upon the mountains. Better is a lentil eaten in the shade with friends than a fatted ox shared among quarrelling brethren.",
        "Blessed are they that keep the well in the days of plenty, for they shall drink when the springs are stopped. Blessed is the weaver that leaveth a thread for the widow, for her cloth shall not be wanting in the winter. Blessed is the ferryman that carrieth the lame without price, for his boat shall not be overturned by the flood.",
        "Hearken, O my son, unto the counsel of the potter: the clay that is worked in haste cracketh in the fire, and the vessel that is turned with patience holdeth water for a generation. So is the word spoken in wrath, and so is the word spoken in quietness; the one breaketh and the other endureth.",
    ],
    "fresh-founding": [
        "Whereas the free towns of the northern valleys have long borne the burden of tolls laid upon their rivers without their consent, and whereas their petitions have been answered with silence and their messengers with delay, we the delegates thereof, assembled at Marrow Ford, do hold it our plain duty to declare the grievances which compel us to act.",
        "We hold it to be beyond dispute that no harbour, mill, or common pasture may be taken from a township by any council in which that township has no voice; that the water of a river belongs to all who live along its banks; and that a tax imposed in secret is no lawful tax, but a theft made formal by the seal of office.",
        "Be it therefore resolved by the assembled delegates of the river townships, that a permanent council be formed, meeting each spring at the first full moon, to which every township shall send two members chosen by open vote, and that no toll, levy, or closure of the common roads shall stand unless this council approve it by a majority of two in three.",
    ],
    "fresh-oratory": [
        "Friends and neighbours, eleven winters ago this harbour froze from the breakwater to the cannery steps, and the boats that stayed out past the lantern hour did not come home. We stand today on a sea wall raised by the hands of their sons and daughters, and we ask whether a town so tested can keep faith with the promise it made on that bitter night.",
        "We did not come to this square to bury an argument, but to finish a work. The bridge across the Tollen was begun by people who will never cross it, and it falls to us, who have every advantage they lacked, to lay the last stone, so that the farms of the east bank and the markets of the west shall never again be divided by the floods of a single night.",
        "Let it be remembered that the lamps of the mill town were lit not by fortune but by labour, that the schoolhouse was raised by subscription of pennies, and that the charter we sign this evening belongs to the spinners and the carters as surely as to the magistrates, so that what was built by the many shall not be sold by the few.",
    ],
    "fresh-novel-a": [
        "It was generally agreed among the ladies of Pellham Cross that Mr. Ambrose Tilney had come into the county for no better reason than to be disappointed in it. He had let the old rectory for a year, complained of its chimneys within a week, and was seen at the assembly rooms only once, when he danced with nobody and left before the supper was served.",
        "The winter that Margaret Coyle turned fourteen, the canal froze so hard that the coal barges stood idle for six weeks, and her father, who had never been idle in his life, took to walking the towpath at night with a lantern, as though by looking hard enough at the ice he might persuade it to give way.",
        "My grandmother kept a ledger of every debt owed to her, and it was the first book I ever learned to read. The entries were in violet ink, and beside each name she had drawn a small symbol, a key, a fish, a cracked cup, whose meaning she would never explain, though she allowed that the cracked cup meant the money would not be coming back.",
    ],
    "fresh-novel-b": [
        "Nobody in the village of Hask remembered exactly when the clockmaker's daughter had stopped speaking, only that she had been talkative as a girl and silent as a woman, and that the clocks in her father's window had all been set, on the morning of his funeral, to a quarter past four.",
        "The letter arrived on a Tuesday, which was unfortunate, because Tuesdays were the days on which Mrs. Aldous Brent received callers, and she was obliged to read it with the vicar's wife watching her over the rim of a teacup, pretending to admire the drawing-room curtains while missing nothing of the colour that rose in her hostess's face.",
        "The lighthouse at Carrow Point had been automated for thirty years when Elspeth came back to it, carrying a suitcase, a box of her father's charts, and a key that no longer fitted any door on the island, though she tried it in every lock she passed on the long walk up from the jetty.",
    ],
    "fresh-verse-a": [
        "What is this hour but borrowed light, A coin the evening lends the day, Which we must spend before the night Recalls the debt and bears away The gold that glittered on the sill? Yet while it lingers, let us stay, And count it ours, and hold it still, As misers hold what they cannot keep.",
        "Speak not to me of crowns, my lord, when all the crown I ever sought Was the quiet of an orchard wall, and the apples falling where they would; Give me the hour before the bells, the unwatched field, the unsent word, And keep your kingdoms and your wars, for they were never mine to hold.",
        "O faithless tide, that turns at noon, And steals the footprints from the sand, As if the sea could not abide That we had walked there hand in hand; Yet I will write our names again, Above the wrack, beyond thy reach, And let the gulls bear witness, then, Who kept the promise of the beach.",
    ],
    "fresh-verse-b": [
        "Now comes the herald with his ragged flag, And tells of armies lying in the rain, Of horses drowned within the river's drag, And captains who will never ride again. Go, tell the queen her garden is a field Where no rose grows but what the sword has made, And bid her weigh what victory can yield Against the debt in widows to be paid.",
        "I knew a fool who kept a flock of words, And fed them crumbs of rhyme upon his sleeve, And taught them all the songs of summer birds, Yet when he sang, not one of them would leave. So is the heart that hoards what it should give: It sings alone, and calls the silence peace, And never learns that words are made to live In other mouths, and grow by their release.",
        "Thou cloud that wanderest at the close of day, Art thou the ghost of some forgotten sail, That, having lost the harbour and the bay, Still seeks the shore along the western pale? Rest, weary wanderer, for the night is kind, And every port is open to the blind.",
    ],
}


def rows():
    for label, groups in ((1, FAMOUS), (0, FRESH)):
        for doc_id, passages in groups.items():
            for i, text in enumerate(passages):
                yield {"id": f"{doc_id}-{i + 1}", "text": text, "label": label, "doc_id": doc_id}


if __name__ == "__main__":
    out = Path(__file__).with_name("demo.jsonl")
    with open(out, "w", encoding="utf-8") as handle:
        for row in rows():
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {out}")
