"""A NITF-like schema description (after the News Industry Text Format DTD that the
YFilter experiments used), in the form :class:`yfilter.generators.schema.Schema` reads.

Each element lists its children as ``(name, min, max)`` or ``(name, min, max,
weight)`` (``max`` None: unbounded, capped by the document generator's MaxRepeats;
``weight`` scales how often an optional child appears, default 1), its attributes
with their value domains, and, when it holds text, a list of words its text is
drawn from. As in NITF, block content nests (``block``, ``bq``, ``fn``, ``note``,
lists and table cells hold paragraphs and blocks again) and paragraphs hold inline
elements, some of which hold inline elements again, so DocDepth controls how deep
documents go and there are millions of distinct paths of depth 6.
"""

# Value domains are wide where real news metadata is (identifiers, names, places,
# keywords, dates) and narrow where it is a code list (urgency, types), so that
# equality predicates have realistic selectivity.
_WORDS = ["markets", "rally", "storm", "election", "court", "police", "shares", "rain",
          "team", "wins", "loses", "report", "minister", "budget", "oil", "price",
          "vote", "strike", "bank", "rates", "drought", "fire", "flood", "trial", "deal",
          "merger", "profit", "loss", "coach", "final", "cup", "record", "heat", "port",
          "union", "talks", "border", "summit", "crash", "launch"]
_NAMES = ["Smith", "Jones", "Nguyen", "Garcia", "Chen", "Okafor", "Muller", "Rossi",
          "Kowalski", "Haddad", "Tanaka", "Silva", "Ivanova", "Murphy", "Dubois", "Kim",
          "Patel", "Cohen", "Larsen", "Novak", "Mensah", "Costa", "Walsh", "Ortiz"]
_PLACES = ["Sydney", "Paris", "Lagos", "Oslo", "Lima", "Austin", "Delhi", "Seoul",
           "Perth", "Cairo", "Quito", "Riga", "Hanoi", "Dakar", "Porto", "Accra",
           "Tunis", "Minsk", "Baku", "Doha", "Kyiv", "Lyon", "Cork", "Graz"]
_ORGS = ["AAP", "AFP", "Reuters", "UN", "NASA", "FIFA", "OPEC", "WHO", "IMF", "NATO",
         "WTO", "ECB", "IOC", "UEFA", "OECD", "ASEAN"]
_IDS = [f"{src}.{n}" for src in ("AAP", "AFP", "AP", "DPA") for n in range(1, 51)]
_DATES = [f"2025{m:02d}{d:02d}" for m in range(1, 13) for d in (1, 8, 15, 22)]

_INLINE = ["em", "person", "org", "location", "q", "money", "num", "chron", "event",
           "function", "object.title", "virtloc", "a", "classifier", "lang", "sub", "sup",
           "pronounce", "copyrite", "br"]
_BLOCKS = ["p", "block", "bq", "fn", "note", "ol", "ul", "dl", "table", "media", "hr", "pre",
           "nitf-table"]


def _inline(weight: float = 0.12) -> list:
    return [[name, 0, None, weight] for name in _INLINE]


def _block_content(weight: float = 0.35) -> list:
    return [[name, 0, None, weight if name != "p" else 1.0] for name in _BLOCKS]


NITF = {
    "root": "nitf",
    "elements": {
        "nitf": {"children": [["head", 1, 1], ["body", 1, 1]],
                 "attrs": {"version": ["-//IPTC//DTD NITF 3.4//EN", "-//IPTC//DTD NITF 3.6//EN"],
                           "change.date": _DATES}},
        "head": {"children": [["title", 0, 1], ["meta", 0, None], ["tobject", 0, 1],
                              ["docdata", 1, 1], ["pubdata", 0, None],
                              ["revision-history", 0, None]]},
        "title": {"text": _WORDS},
        "meta": {"attrs": {"name": ["anpa-category", "anpa-keyword", "anpa-priority", "source"],
                           "content": _WORDS}},
        "tobject": {"children": [["tobject.property", 0, None], ["tobject.subject", 0, None]],
                    "attrs": {"tobject.type": ["News", "Analysis", "Feature", "Opinion"]}},
        "tobject.property": {"attrs": {"tobject.property.type": ["Current", "History",
                                                                 "Obituary", "Forecast"]}},
        "tobject.subject": {"attrs": {
            "tobject.subject.refnum": ["02003001", "04006002", "15000000", "11000000"],
            "tobject.subject.type": ["Justice", "Economy", "Sport", "Politics", "Stock"],
            "tobject.subject.matter": ["Police", "Markets", "Football", "Elections"],
            "tobject.subject.detail": ["investigation", "law enforcement", "results"]}},
        "docdata": {"children": [["doc-id", 0, 1], ["urgency", 0, 1], ["date.issue", 0, 1],
                                 ["date.release", 0, 1], ["doc.copyright", 0, 1],
                                 ["key-list", 0, 1], ["identified-content", 0, 1]]},
        "doc-id": {"attrs": {"id-string": _IDS,
                             "regsrc": ["AAP", "AFP", "AP"]}},
        "urgency": {"attrs": {"ed-urg": ["1", "2", "3", "4", "5", "6", "7", "8"]}},
        "date.issue": {"attrs": {"norm": [d + "T000000Z" for d in _DATES]}},
        "date.release": {"attrs": {"norm": [d + "T080000Z" for d in _DATES]}},
        "doc.copyright": {"attrs": {"year": ["2013", "2024", "2025"], "holder": _ORGS}},
        "key-list": {"children": [["keyword", 1, None]]},
        "keyword": {"attrs": {"key": _WORDS}},
        "identified-content": {"children": [["person", 0, None], ["org", 0, None],
                                            ["location", 0, None]]},
        "pubdata": {"attrs": {"type": ["print", "web", "broadcast"],
                              "edition.area": ["SF", "NY", "LA", "SYD", "LON"],
                              "edition.name": ["morning", "evening", "final"],
                              "position.section": ["front", "sport", "business", "world"],
                              "position.sequence": [str(n) for n in range(1, 41)]}},
        "revision-history": {"attrs": {"name": _NAMES, "function": ["editor", "writer"]}},
        "body": {"children": [["body.head", 0, 1], ["body.content", 1, 1], ["body.end", 0, 1]]},
        "body.head": {"children": [["hedline", 1, 1], ["byline", 0, None], ["distributor", 0, 1],
                                   ["dateline", 0, 1], ["abstract", 0, 1]]},
        "hedline": {"children": [["hl1", 1, 1], ["hl2", 0, None]]},
        "hl1": {"text": _WORDS, "attrs": {"id": [f"h{n}" for n in range(1, 31)]}},
        "hl2": {"text": _WORDS},
        "byline": {"children": [["person", 0, 1], ["byttl", 0, 1]]},
        "byttl": {"text": ["Correspondent", "Editor", "Staff"]},
        "distributor": {"text": _ORGS},
        "dateline": {"children": [["location", 0, 1], ["story.date", 0, 1]]},
        "story.date": {"attrs": {"norm": _DATES},
                       "text": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]},
        "abstract": {"children": [["p", 1, None]]},
        "body.content": {"children": _block_content(0.5)},
        "block": {"children": [["hl2", 0, 1], *_block_content()],
                  "attrs": {"style": ["quote", "box", "sidebar"],
                            "id": [f"b{n}" for n in range(1, 31)]}},
        "bq": {"children": [["block", 1, None], ["credit", 0, 1]],
               "attrs": {"nowrap": ["nowrap"], "quote-source": _NAMES}},
        "credit": {"children": _inline(0.2), "text": _NAMES},
        "fn": {"children": [["p", 1, None]], "attrs": {"id": [f"fn{n}" for n in range(1, 21)]}},
        "note": {"children": [["body.content", 1, 1]],
                 "attrs": {"noteclass": ["cpyrt", "end", "hd", "editorsnote", "trademk",
                                         "undef"], "type": ["std", "pa", "npa"]}},
        "ol": {"children": [["li", 1, None]], "attrs": {"seqnum": ["1", "2", "3", "4"]}},
        "ul": {"children": [["li", 1, None]]},
        "li": {"children": [*_inline(0.15), ["p", 0, None, 0.3], ["block", 0, None, 0.15]],
               "text": _WORDS},
        "dl": {"children": [["dt", 1, None], ["dd", 1, None]]},
        "dt": {"children": _inline(0.1), "text": _WORDS},
        "dd": {"children": [["block", 0, None, 0.3], ["p", 0, None, 0.5]]},
        "hr": {},
        "pre": {"text": _WORDS},
        "nitf-table": {"children": [["nitf-table-metadata", 1, 1], ["table", 0, 1]]},
        "nitf-table-metadata": {"attrs": {"subclass": ["financial", "sports", "weather"],
                                          "status": ["pre", "snap", "interim", "final"]}},
        "p": {"children": _inline(),
              "attrs": {"lede": ["true", "false"], "class": ["lead", "body", "quote"]},
              "text": _WORDS},
        "q": {"children": _inline(0.08), "text": _WORDS, "attrs": {"quote-source": _NAMES}},
        "em": {"children": [[n, 0, None, 0.08] for n in ("person", "org", "location", "num")],
               "text": _WORDS, "attrs": {"class": ["italic", "bold"]}},
        "money": {"text": ["10", "250", "3.5", "1200"],
                  "attrs": {"unit": ["USD", "EUR", "AUD", "JPY"], "date": _DATES}},
        "num": {"text": ["1", "2", "10", "2.5", "-3", "100"],
                "attrs": {"units": ["pct", "kg", "km"], "decimal-ch": [".", ","]}},
        "chron": {"text": ["today", "Monday", "last week"], "attrs": {"norm": _DATES}},
        "event": {"text": _WORDS, "attrs": {"start-date": _DATES, "idsrc": ["AAP", "AFP"]}},
        "function": {"text": ["minister", "coach", "chief executive"],
                     "attrs": {"value": ["gov", "sport", "biz"]}},
        "object.title": {"text": _WORDS, "attrs": {"value": _WORDS}},
        "virtloc": {"text": ["example.com", "news.example"], "attrs": {"value": _WORDS}},
        "a": {"children": [["em", 0, 1, 0.2]], "text": _WORDS,
              "attrs": {"href": [f"http://example.com/{n}" for n in range(1, 41)],
                        "name": _WORDS}},
        "classifier": {"text": _WORDS, "attrs": {"type": ["topic", "genre", "priority"],
                                                 "value": _WORDS}},
        "lang": {"children": _inline(0.05), "text": _WORDS,
                 "attrs": {"{http://www.w3.org/XML/1998/namespace}lang": ["en", "fr", "de"]}},
        "sub": {"text": ["2", "n"]},
        "sup": {"text": ["2", "th"]},
        "pronounce": {"text": _WORDS, "attrs": {"guide": ["ipa"], "phonetic": _WORDS}},
        "copyrite": {"children": [["copyrite.year", 0, 1], ["copyrite.holder", 0, 1]]},
        "copyrite.year": {"text": ["2013", "2024", "2025"]},
        "copyrite.holder": {"text": _ORGS},
        "br": {},
        "person": {"children": [["name.given", 0, 1, 0.3], ["name.family", 0, 1, 0.3],
                                ["function", 0, 1, 0.2]],
                   "text": _NAMES, "attrs": {"idsrc": ["AAP", "AFP"], "value": _NAMES}},
        "name.given": {"text": ["Ann", "Bo", "Cy", "Di", "Ed", "Flo"]},
        "name.family": {"text": _NAMES},
        "org": {"text": _ORGS, "attrs": {"idsrc": ["AAP", "AFP"], "value": _ORGS}},
        "location": {"children": [["city", 0, 1, 0.3], ["country", 0, 1, 0.3],
                                  ["region", 0, 1, 0.2]],
                     "text": _PLACES, "attrs": {"location-code": ["AU", "FR", "NG", "NO"]}},
        "city": {"text": _PLACES},
        "country": {"text": ["Australia", "France", "Nigeria", "Norway", "Peru", "Korea"],
                    "attrs": {"iso-cc": ["AU", "FR", "NG", "NO", "PE", "KR"]}},
        "region": {"text": ["north", "south", "east", "west"]},
        "table": {"children": [["tr", 1, None]], "attrs": {"border": ["0", "1", "2"]}},
        "tr": {"children": [["th", 0, None, 0.3], ["td", 1, None]]},
        "th": {"children": _inline(0.05), "text": _WORDS},
        "td": {"children": [*_inline(0.05), ["p", 0, None, 0.2], ["block", 0, None, 0.1]],
               "text": ["1", "2", "10", "2.5", "-3", "n/a"],
               "attrs": {"align": ["left", "right"]}},
        "media": {"children": [["media-reference", 1, None], ["media-caption", 0, 1]],
                  "attrs": {"media-type": ["image", "video", "audio"]}},
        "media-reference": {"attrs": {"source": [f"img{n}.jpg" for n in range(1, 41)],
                                      "mime-type": ["image/jpeg", "image/png", "video/mp4"],
                                      "height": ["120", "480", "1080"],
                                      "width": ["160", "640", "1920"]}},
        "media-caption": {"children": [["p", 0, 1], *_inline(0.1)], "text": _WORDS},
        "body.end": {"children": [["tagline", 0, 1]]},
        "tagline": {"text": ["AAP", "AFP", "ends"]},
    },
}
