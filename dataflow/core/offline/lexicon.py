"""Word lists of the offline extractor (dataflow/core/offline/extractor.py and the
modules beside it).

Kept apart so the extractor reads as rules, and so the lists can grow without
burying them. Every list is lowercase; membership is tested on lowercased
tokens. The lists are deliberately small and generic (English news and
organisational prose): a cue word must be right nearly every time it appears,
because the extractor prefers precision to recall.
"""

from __future__ import annotations


def words(text: str) -> frozenset[str]:
    """A frozenset of the whitespace-separated words of `text`."""
    return frozenset(text.split())


FUNCTION_WORDS = words(
    """a an the this that these those it its they them their theirs there here he she his
    her hers him we our ours us you your yours i me my who whom whose which what when where
    why how if then than so but or nor and yet for of in on at by to from with without within
    into onto over under about above below after before during since until while as because
    although though whether also not no yes all any each every some many much more most
    other others such both either neither is are was were be been being am do does did done
    has have had having can could should would shall must might however meanwhile moreover
    furthermore therefore thus hence instead indeed still today yesterday tomorrow tonight
    now later earlier recently currently finally first second third last next according
    despite following including unlike like among between through across against along
    around behind beyond near per via upon toward towards whereas unless once only even just
    perhaps maybe overall additionally similarly nevertheless nonetheless otherwise
    eventually initially subsequently previously ultimately notably specifically generally
    typically usually often sometimes always never already soon again together please
    thanks thank dear hello hi ok okay none nothing something everything anything someone
    everyone anyone nobody everybody several few own same see note figure fig table section
    chapter appendix page step example summary introduction conclusion abstract overview
    background contents let lets oh well while whilst amid amidst throughout inside outside
    where's there's here's what's that's"""
)
# Greetings, interjections, chat abbreviations and discourse fillers: never a name nor a
# word of one, in any case ("Hey Adam" is Adam, "LOL" no acronym). Words that also begin
# real names ("Great", "Nice", "Morning", "Cheers", "Welcome") are deliberately absent:
# a sentence-initial word still needs evidence to be a name, which catches "Tough game".
INTERJECTIONS = words(
    """hey hi hiya hello hullo howdy yo sup greetings bye goodbye byebye cya ciao thanks
    thank thx tysm cheers congrats congratulations sorry oops whoops oh ooh ah aah aha
    ahh aw aww uh uhh um umm erm er hmm hmmm huh meh ugh argh eh yay yeah yea yep yup yes
    yess nah nope no ok okay okey kk alright aight sure wow whoa woah omg omfg lol lmao
    lmfao rofl haha hahaha hehe hihi lolz btw idk imo imho tbh fyi brb ikr smh pls plz
    please well so anyway anyways honestly seriously actually basically literally totally
    definitely absolutely exactly indeed gosh jeez geez wowza yikes
    hooray hurray phew ew eww shh psst mhm hm xd wtf ffs ngl tbf irl afaik ttyl gg np nvm
    thnx lolol hahah hahahaha"""
)
# Verbs after "I" that make it the pronoun, not a regnal number ("Sarah, I said" is
# not "Sarah I"; "Elizabeth I was crowned" is Elizabeth I).
FIRST_PERSON_VERBS = words(
    """am have think know want do did don't didn't can can't will won't would wouldn't
    love mean guess hope feel need saw said told got met just really also thought heard
    wish agree bet believe"""
)
# Sentence-initial verbs that address someone ("Tell Sarah", "Ask Adam Smith").
IMPERATIVES_BEFORE_NAMES = words(
    "tell ask call meet text message email ping remind invite send give show help"
)
# Two-word greetings cut off the front of a name ("Good Morning Adam" is Adam); "Good"
# and "Happy" alone begin real names, so only the pairs are listed.
GREETING_PAIRS = frozenset(
    {
        ("good", "morning"),
        ("good", "afternoon"),
        ("good", "evening"),
        ("good", "night"),
        ("good", "luck"),
        ("happy", "birthday"),
        ("happy", "anniversary"),
    }
)
KEYWORD_STOPWORDS = (
    FUNCTION_WORDS
    | words(
        """may will said says say told tell tells added new use used using uses get got make
    made makes way ways thing things lot lots one two three four five also very really
    just said way yes non based"""
    )
    | INTERJECTIONS
)
CONNECTORS = words("of de van von der den da del della di du la le the and & y dos das ter")
CONDITIONAL_CONNECTORS = words("and for on")  # joined only when the span has a cue
NO_BREAK_ABBREVIATIONS = words(
    """mr mrs ms mx dr prof st mt ft gen sen rep gov lt col capt sgt maj cmdr adm rev hon
    pres supt cllr e.g i.e eg ie cf vs v approx ca fig figs no nos vol vols pp ch sec art est
    jan feb mar apr jun jul aug sep sept oct nov dec"""
)
MAYBE_ABBREVIATIONS = words("inc corp co ltd llc plc jr sr bros etc al esq dept univ assn")
NAME_ABBREVIATIONS = words(
    "mr mrs ms mx dr prof st mt ft jr sr gen sen rep gov lt col capt sgt rev cllr"
)
# Words that, before a name, say it is a person ("Dr", "Councillor", "Treasurer").
TITLE_WORDS = words(
    """mr mrs ms mx miss dr prof professor sir dame lord lady president vice prime minister
    chancellor secretary chief executive officer
    ceo cfo cto coo chairman chairwoman chair chairperson founder cofounder co-founder
    director senator sen rep representative congressman congresswoman governor gov mayor
    judge justice king queen prince princess pope general gen colonel col captain capt
    lieutenant lt sergeant sgt admiral commander rev reverend bishop cardinal rabbi imam
    sheikh coach ambassador deputy councillor councilor cllr alderman
    treasurer manager commissioner superintendent inspector detective constable sheriff
    trustee registrar dean provost rector vicar"""
)
# Title words only when another title follows ("Chief Financial Officer",
# "Senior Vice President"), so "Institute of Technology" keeps its last word.
TITLE_MODIFIERS = words(
    """vice prime chief financial operating technology technical managing senior deputy
    acting interim assistant associate executive general"""
)
# A title word only when the name runs on with "of" ("Head of Projects").
TITLE_WORDS_BEFORE_OF = words("head")
# Occupations: capitalised before a name they are cut off like titles ("Novelist
# Ruth Caddick"); after a name ("X, a hydro engineer") they mark a person.
OCCUPATIONS = words(
    """spokesman spokeswoman spokesperson author writer scientist researcher economist
    analyst engineer journalist reporter editor actor actress singer artist
    inventor physicist mathematician chemist biologist historian philosopher
    poet novelist composer architect lawyer attorney officer teacher lecturer student
    nurse doctor farmer fisherman consultant campaigner activist volunteer
    accountant planner surveyor technician apprentice designer programmer banker
    entrepreneur diplomat politician candidate chef pilot athlete footballer
    midfielder goalkeeper astronaut photographer"""
)
RELATIVES = words("colleague wife husband son daughter father mother brother sister friend")
PERSON_ROLES = (
    TITLE_WORDS
    | OCCUPATIONS
    | RELATIVES
    | words("head player leader member partner owner resident investor developer striker")
)
# Roles that also fit an organisation ("a leader in batteries", "a member of NATO"):
# they mark a person only right before a name ("leader Kim"), never after one.
ORG_COMPATIBLE_ROLES = words("leader player member partner owner investor developer")
SPEECH_VERBS = words(
    "said says told added wrote explained argued noted recalled asked asks replied replies answered"
)
# Verbs (after a name) that nearly always have a person as their subject.
PERSON_VERBS = SPEECH_VERBS | words(
    """insisted believes believed thinks thought recalls remembers admitted denied
    apologised apologized resigned retired married smiled laughed testified
    co-founded cofounded chaired chairs insists warned urged joined leads founded led
    heads"""
)
# After these verbs a passive or an idiom is likely ("founded in 1990", "led to").
PASSIVE_PRONE_VERBS = words("joined leads founded led heads")
PASSIVE_FOLLOWERS = words("in by to on at from into as with under")
# "X <verb> <particle>": "grew up", "trained as", "was appointed".
PERSON_VERB_PAIRS = frozenset(
    {
        ("grew", "up"),
        ("trained", "as"),
        ("studied", "at"),
        ("studied", "law"),
        ("was", "appointed"),
        ("was", "elected"),
        ("was", "born"),
        ("is", "married"),
        ("has", "chaired"),
        ("joined", "the"),
        ("founded", "the"),
        ("leads", "the"),
    }
)
# "led by X", "founded by X": the agent of these is usually a person.
AGENT_VERBS = words("led chaired directed managed founded co-founded headed run coached")
# Pronouns that refer to a person (not "they": organisations take it too).
PERSON_PRONOUNS = words("he she him her his hers himself herself")
# Skipped between a name and its role: "X, the cooperative's former General Manager".
APPOSITION_FILLERS = words(
    "the a an its his her their our then now formerly former currently also until since"
)
LOCATIVE_VERBS = words(
    """based located headquartered born lives lived live living held situated arrived
    stationed hosted died grew raised moved settled opened landed"""
)
SITES = words(
    """office offices headquarters lab laboratory plant factory campus branch store stores
    facility site mine port embassy depot terminal warehouse yard hub"""
)
GEO_PREPOSITIONS = words("near across throughout outside")
# "residents of X", "the village of X", "its only village, X".
GEO_NOUNS = words(
    """city town village capital region state residents inhabitants outskirts suburbs
    island port harbour harbor hamlet county province district"""
)
LEGAL_FORMS = words("inc corp corporation co company ltd limited llc plc gmbh ag sa group")
MONTHS_AND_DAYS = words(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday"""
)
ORG_SUFFIXES = LEGAL_FORMS | words(
    """incorporated companies llp nv bv srl spa pty lp university college school academy
    institute institution foundation agency bank council committee commission ministry
    department dept labs lab laboratory laboratories association party team club society
    union federation organization organisation authority bureau board services systems
    technologies holdings partners ventures capital media news press publishing airlines
    airways motors electric industries enterprises solutions software networks
    pharmaceuticals pharma therapeutics bancorp fund trust court parliament congress senate
    assembly army navy police church hospital clinic museum library centre center reserve
    times journal post magazine nations studios records entertainment foods brands energy
    government administration directorate coalition alliance consortium network
    broadcasting fc cooperative co-operative co-op coop cooperatives mutual polytechnic
    charity guild syndicate firm observatory"""
)
ORG_HEADS = words(
    """university bank ministry department institute college school board agency bureau
    commission committee council federation organization organisation society church
    museum academy government office house"""
)
GEO_SUFFIXES = words(
    """city county river mountain mountains lake island islands street avenue ave road
    boulevard drive lane way square park state states province republic kingdom valley bay
    ocean sea gulf coast peninsula desert forest canyon falls strait channel district region
    territory village town heights hills beach harbor harbour airport bridge parish borough
    prefecture oblast canton empire quay weir estuary loch firth headland
    reservoir creek"""
)
GEO_HEADS = words(
    """lake mount mt st san santa cape gulf isle isles republic kingdom city county province
    port fort river loch"""
)
EVENT_SUFFIXES = words(
    """war wars summit conference olympics election elections festival crisis revolution
    treaty accord accords agreement expo fair cup championship championships tournament
    marathon forum convention symposium workshop battle massacre pandemic epidemic outbreak
    earthquake storm storms protests riots uprising invasion siege awards prize ceremony
    week day series bowl open prix derby parade carnival flood floods flooding meeting
    strike strikes launch blackout drought wildfire wildfires tsunami eruption famine
    heatwave referendum"""
)
# Organisations by default, events when a year is part of the name ("2023 Members'
# Assembly" against "National Assembly").
EVENT_SUFFIXES_WITH_YEAR = words("assembly congress session")
EVENT_HEADS = words("battle war siege treaty hurricane typhoon cyclone storm operation expo")
# Words that make a name a project, programme or facility, never a person.
THING_WORDS = words(
    """programme program project projects scheme initiative farm plant station grid
    microgrid pipeline mine line railway network platform campaign plan strategy
    model series mission system systems"""
)
# Capitalised common nouns that are not names on their own: collective nouns,
# departments and offices ("Members", "Projects", "Finance").
GENERIC_WORDS = words(
    """members member staff residents shareholders employees directors trustees volunteers
    partners funders lenders customers users participants delegates councillors officials
    projects operations finance research sales marketing communications engineering policy
    planning development programmes programs technology science products design data people
    partnerships security legal compliance innovation growth education services
    administration governance strategy fundraising membership outreach procurement
    accounts"""
)
# Nationality and language adjectives ("a Swedish diplomat"): no entity type fits them.
DEMONYMS = words(
    """afghan albanian algerian american argentine argentinian armenian australian austrian
    bangladeshi belgian bolivian brazilian british bulgarian cambodian canadian chilean
    chinese colombian croatian cuban cypriot czech danish dutch ecuadorian egyptian english
    estonian ethiopian european filipino finnish french georgian german ghanaian greek
    hungarian icelandic indian indonesian iranian iraqi irish israeli italian jamaican
    japanese jordanian kazakh kenyan korean kuwaiti latvian lebanese libyan lithuanian
    malaysian maltese mexican moldovan mongolian moroccan nepali nepalese nigerian
    norwegian pakistani palestinian peruvian polish portuguese qatari romanian russian
    rwandan saudi scottish senegalese serbian singaporean slovak slovenian somali spanish
    sudanese swedish swiss syrian taiwanese thai tunisian turkish ugandan ukrainian
    uruguayan uzbek venezuelan vietnamese welsh yemeni zambian zimbabwean african asian
    arab arabic latin nordic baltic balkan western eastern northern southern"""
)
# Cue words that are names on their own ("Parliament voted", "the Olympics").
STANDALONE_CUE_NAMES = words("congress parliament senate olympics paralympics times")
# First words of multi-word names that are not given names ("New", "North", "Royal").
NOT_GIVEN_NAMES = words(
    """new north south east west northern southern eastern western central upper lower
    great greater little big old high grand royal national federal international global
    general united american british european african asian english french german
    chinese indian japanese russian spanish italian scottish irish welsh canadian
    australian annual public community regional local first second third saint holy
    democratic republican labour conservative liberal green red blue black white golden
    silver modern ancient early late northern coastal rural urban social digital
    open free mount lake port cape fort river isle"""
)
GAZETTEER = words(
    """afghanistan albania algeria argentina armenia australia austria azerbaijan bangladesh
    belarus belgium bolivia brazil bulgaria cambodia cameroon canada chile china colombia
    croatia cuba cyprus czechia denmark ecuador egypt england estonia ethiopia finland france
    germany ghana greece hungary iceland india indonesia iran iraq ireland israel italy
    jamaica japan jordan kazakhstan kenya korea kuwait laos latvia lebanon libya lithuania
    luxembourg malaysia mali mexico moldova mongolia morocco mozambique myanmar nepal
    netherlands nigeria norway pakistan panama peru philippines poland portugal qatar romania
    russia rwanda scotland senegal serbia singapore slovakia slovenia somalia spain sudan
    sweden switzerland syria taiwan tanzania thailand tunisia turkey uganda ukraine uruguay
    uzbekistan venezuela vietnam wales yemen zambia zimbabwe britain america usa us u.s. uk
    u.k. london paris berlin madrid rome tokyo beijing shanghai moscow delhi mumbai bangalore
    karachi lagos cairo nairobi istanbul dubai riyadh tehran baghdad jerusalem athens vienna
    prague warsaw budapest amsterdam brussels geneva zurich stockholm oslo copenhagen
    helsinki dublin edinburgh lisbon barcelona milan munich frankfurt hamburg toronto
    montreal vancouver ottawa chicago houston boston seattle atlanta miami dallas denver
    detroit philadelphia lima bogota santiago sydney melbourne auckland seoul bangkok jakarta
    manila hanoi kyiv kiev taipei osaka washington africa asia europe antarctica oceania
    arctic california texas florida illinois ohio michigan massachusetts pennsylvania
    virginia oregon arizona nevada colorado alaska hawaii"""
) | frozenset(
    """new zealand|south africa|south korea|north korea|saudi arabia|united states|united
    kingdom|united arab emirates|sri lanka|costa rica|czech republic|hong kong|puerto
    rico|great britain|new delhi|abu dhabi|tel aviv|new york|los angeles|san francisco|las
    vegas|silicon valley|mexico city|sao paulo|são paulo|rio de janeiro|buenos aires|north
    america|south america|latin america|middle east|new jersey|north carolina|south
    carolina|washington d.c.|west bank|gaza strip""".replace("\n    ", " ").split("|")
)
FIRST_NAMES = words(
    """james john robert michael william david richard joseph thomas charles christopher
    daniel matthew anthony mark donald steven paul andrew joshua kenneth kevin brian george
    timothy ronald edward jason jeffrey ryan jacob gary nicholas eric jonathan stephen larry
    justin scott brandon benjamin samuel gregory alexander frank patrick raymond jack dennis
    jerry tyler aaron jose adam nathan henry douglas zachary peter kyle walter ethan jeremy
    harold keith christian roger noah gerald carl terry sean austin arthur lawrence jesse
    dylan bryan joe billy bruce albert gabriel logan alan juan wayne roy ralph eugene
    vincent russell louis philip johnny mary patricia jennifer linda elizabeth barbara susan
    jessica sarah karen nancy lisa betty margaret sandra ashley kimberly emily donna michelle
    dorothy carol amanda melissa deborah stephanie rebecca sharon laura cynthia kathleen amy
    shirley angela helen anna brenda pamela nicole emma samantha katherine christine rachel
    catherine carolyn janet ruth maria heather diane julie joyce victoria olivia kelly
    christina lauren joan evelyn judith megan andrea hannah martha jacqueline frances gloria
    ann teresa kathryn sara janice jean alice madison doris abigail julia judy grace denise
    marilyn danielle theresa sophia marie diana natalie isabella charlotte rose ada pierre
    hans klaus emmanuel vladimir xi wei mohammed muhammad ahmed ali fatima hiroshi yuki raj
    priya satya sundar elon jeff bill tim sam sergey steve jensen marc jane bob tom ben
    greta angela olaf boris keir rishi narendra recep jacinda justin kamala hillary barack
    ivan igor dmitri sofia lucia carlos luis miguel ana giulia marco luca francesco harry ron
    danny tony jimmy bobby eddie freddie johnny kenny lenny ricky ronnie sammy tommy
    willie alex alfred allen andy barry ben benny bernard bradley brendan brett calvin
    cameron chris clarence claude clint colin craig curtis darren dave derek doug duncan
    dustin edgar edwin elliot elliott ernest eugene evan felix floyd francis fred
    frederick geoffrey gilbert glenn gordon graham greg herbert howard hugh ian isaac
    jake jared jay jeffery jerome jim joel jon jonah julian karl kurt lee leo leon
    leonard lewis liam lloyd lucas luke malcolm marcus martin marvin matt max melvin
    mike mitchell neil nelson nick nigel norman oliver oscar owen perry phil reginald
    rex rick rodney roland ross rudy russ sidney simon stanley stuart ted terrence
    theodore toby todd travis trevor troy vernon victor vince wallace warren wesley abby
    adriana agnes alicia alison allison amelia andrea angelina anne annie audrey ava
    barbara beatrice becky bella beth bethany betsy beverly bonnie brittany caitlin
    camille candice carla carmen caroline carrie cassandra cecilia celia chloe claire
    clara claudia colleen connie courtney dana daphne darlene debbie delia della diana
    dolores donna edith eileen elaine eleanor elena eliza ella ellen eloise elsie emilia
    erica erin esther ethel eva eve felicity fiona gail gemma georgina gina gwen heidi
    helena ida ingrid irene isabel isabelle jackie jamie jana jasmine jenna jenny jess
    jill joanna joanne jocelyn josephine juliet justine kara kate kathy katie kay kayla
    kim kirsten kristen lana leah leslie lila linda lois lorraine louise lucy lydia lynn
    mabel maggie mandy marcia margot marian marina marjorie martina maureen maxine meg
    melanie mia millie miranda molly monica muriel nadia naomi natasha nina nora olga
    paige paula pauline penelope phoebe phyllis polly rachael rebekah renee rita roberta
    rosa rosemary roxanne sabrina sally shannon sheila shelley sienna sonia sophie
    stella susie sylvia tamara tanya tara tessa thelma tina tracy ursula valerie vanessa
    vera veronica vivian wanda wendy yvonne zoe zoey"""
)

# Derived sets, built once here because several of the extractor's modules test them.
ROMAN_NUMERALS = words("i ii iii iv v vi vii viii ix")
# "its only village, Skerrow": an appositive after these nouns names a place.
GEO_APPOSITION_NOUNS = words("village town city capital hamlet island")
CUE_WORDS = (
    ORG_SUFFIXES
    | ORG_HEADS
    | GEO_SUFFIXES
    | GEO_HEADS
    | EVENT_SUFFIXES
    | EVENT_SUFFIXES_WITH_YEAR
    | EVENT_HEADS
    | THING_WORDS
)
ROLE_WORDS = TITLE_WORDS | TITLE_MODIFIERS | TITLE_WORDS_BEFORE_OF | PERSON_ROLES
# Not a name on its own ("Members", "Treasurer", "Assembly", "Swedish").
LONE_NON_NAMES = (
    CUE_WORDS | ROLE_WORDS | GENERIC_WORDS | DEMONYMS | {d + "s" for d in DEMONYMS}
) - STANDALONE_CUE_NAMES
ROLE_OR_GENERIC = ROLE_WORDS | GENERIC_WORDS
# Never a word of a person's name.
NOT_IN_PERSON_NAMES = CUE_WORDS | ROLE_WORDS | GENERIC_WORDS | GAZETTEER | FUNCTION_WORDS
THING_OR_GENERIC = CUE_WORDS | GENERIC_WORDS
# Roles that, after a name ("X, a former engineer"), make it a person.
ROLES_AFTER_NAME = PERSON_ROLES - ORG_COMPATIBLE_ROLES
# Tails that a bare first word may stand for ("Acme" for "Acme Corp").
SHORTENABLE_TAILS = LEGAL_FORMS | THING_WORDS
# Tested on raw tokens, so it holds the capitalised forms too (the one mixed-case list).
PRONOUN_FORMS = PERSON_PRONOUNS | {p.capitalize() for p in PERSON_PRONOUNS}
# The two apostrophes a possessive may use ("Members'", "Members’").
APOSTROPHES = "'’"
# Words inside a passage title's parentheses or after its comma that type the title
# ("Kiss and Tell (1945 film)" stays "category", "Live (band)" is an organisation).
DISAMBIGUATOR_PERSON = OCCUPATIONS | words(
    """musician rapper footballer cricketer boxer wrestler golfer cyclist swimmer driver
    businessman businesswoman comedian dancer director producer screenwriter bishop priest
    admiral politician judge born died"""
)
DISAMBIGUATOR_ORGANIZATION = ORG_SUFFIXES | words(
    "band company newspaper magazine label airline brand retailer manufacturer franchise"
)
DISAMBIGUATOR_GEO = GEO_SUFFIXES | GEO_NOUNS | words("country suburb municipality commune")
DISAMBIGUATOR_EVENT = words(
    """battle war election elections siege festival tournament championship championships
    olympics earthquake hurricane referendum revolution"""
)
