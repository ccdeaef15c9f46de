"""The sample dataset (``data/factbook.nq.gz``): CIA World Factbook profiles (JSON) to RDF with
extraction provenance. A data-preparation tool, not part of the server: run it from the checkout,

    python -m data.factbook ../shared/data/factbook data/factbook.nq.gz

Each profile ``<region>/<code>.json`` becomes a tg:Document ``urn:trustgraph:doc:<code>``; each
section a tg:Page, each field a tg:Chunk (page and chunk texts go to the librarian graph), and the facts
read from a field form the tg:Subgraph derived from its chunk: TrustGraph's extraction provenance,
subgraph -> chunk -> page -> document by ``prov:wasDerivedFrom``, the subgraph holding each fact as a
triple term (``tg:contains <<( s p o )>>``). Facts go to the ``default`` collection graph,
provenance to its ``:source`` graph. The output is sorted and has a fixed gzip header: the same
profiles always give the same bytes.

Extraction favours precision: list fields are split, stripped of numbers, parentheticals and
notes, and items that do not look like names are dropped.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pyoxigraph import Literal, NamedNode, Quad, RdfFormat, Triple, serialize

from server import vocab
from server.vocab import DC, ENTITY, RDFS, RELATION, XSD, slug

COLLECTION = "default"

# Titles where the profile's "Country name" is missing, "none", or misleading.
TITLE_OVERRIDES = {
    "cf": "Republic of the Congo", "cg": "Democratic Republic of the Congo", "dr": "Dominican Republic",
    "ee": "European Union", "sv": "Svalbard", "um": "United States Pacific Island Wildlife Refuges",
    "oo": "Southern Ocean", "xo": "Indian Ocean", "xq": "Arctic Ocean", "zh": "Atlantic Ocean",
    "zn": "Pacific Ocean", "xx": "World",
}
# Names used for countries in list fields (partners, borders) that the profiles do not give.
ALIASES = {
    "US": "United States", "USA": "United States", "UK": "United Kingdom", "UAE": "United Arab Emirates",
    "EU": "European Union", "DRC": "Democratic Republic of the Congo", "Congo (Kinshasa)":
    "Democratic Republic of the Congo", "Congo (Brazzaville)": "Republic of the Congo", "Korea, South":
    "South Korea", "Korea, North": "North Korea", "Dominican Republic": "Dominican Republic",
    "Gambia": "The Gambia", "Bahamas": "The Bahamas", "Bahamas, The": "The Bahamas",
    "Gambia, The": "The Gambia", "NZ": "New Zealand", "Vatican City": "Holy See (Vatican City)",
    "Holy See": "Holy See (Vatican City)",
}

CONTINENTS = {"Africa", "America", "Asia", "Europe", "Oceania", "Antarctica", "North America", "South America"}

# Relation slug -> rdfs:label.
RELATIONS = {
    "capital": "capital", "borders": "borders", "language": "language", "official-language": "official language",
    "religion": "religion", "ethnic-group": "ethnic group", "government-type": "government type",
    "currency": "currency", "natural-resource": "natural resource", "climate": "climate", "terrain": "terrain",
    "highest-point": "highest point", "lowest-point": "lowest point", "region": "region",
    "located-in": "located in", "legal-system": "legal system", "independence-date": "independence date",
    "independent-from": "independent from", "chief-of-state": "chief of state",
    "head-of-government": "head of government", "export-partner": "export partner",
    "import-partner": "import partner", "export-commodity": "export commodity",
    "import-commodity": "import commodity", "industry": "industry", "agricultural-product": "agricultural product",
    "natural-hazard": "natural hazard", "dependent-area": "dependent area", "major-urban-area": "major urban area",
    "population": "population", "area": "area", "internet-country-code": "internet country code",
    "official-name": "official name", "nationality": "nationality",
}

CLIMATE_WORDS = {
    "tropical": "tropical", "subtropical": "subtropical", "temperate": "temperate", "arid": "arid",
    "semiarid": "semiarid", "semi-arid": "semiarid", "desert": "desert", "continental": "continental",
    "polar": "polar", "arctic": "arctic", "subarctic": "subarctic", "marine": "marine", "maritime": "maritime",
    "monsoon": "monsoonal", "monsoonal": "monsoonal", "equatorial": "equatorial", "humid": "humid",
    "dry": "dry", "hot": "hot", "cold": "cold", "mild": "mild", "cool": "cool", "warm": "warm",
    "rainy": "rainy", "mediterranean": "Mediterranean",
}
TERRAIN_WORDS = {
    "mountains": "mountains", "mountainous": "mountains", "mountain": "mountains", "plains": "plains",
    "plain": "plains", "plateau": "plateau", "plateaus": "plateau", "plateaux": "plateau", "hills": "hills",
    "hilly": "hills", "desert": "desert", "deserts": "desert", "lowlands": "lowlands", "lowland": "lowlands",
    "highlands": "highlands", "highland": "highlands", "valleys": "valleys", "valley": "valleys",
    "volcanic": "volcanic", "volcanoes": "volcanic", "volcano": "volcanic", "coral": "coral", "atoll": "atolls",
    "atolls": "atolls", "flat": "flat", "rugged": "rugged", "swamps": "swamps", "swampy": "swamps",
    "marshes": "marshes", "forest": "forest", "forested": "forest", "rainforest": "rainforest",
    "ice": "ice", "glaciers": "glaciers", "islands": "islands", "coastal": "coastal", "rolling": "rolling",
    "savanna": "savanna", "steppe": "steppe", "tundra": "tundra", "basin": "basin", "delta": "delta",
}
LEGAL_SYSTEM = re.compile(
    r"\b((?:(?:English|French|Spanish|Portuguese|Roman-Dutch|Napoleonic|German|Belgian|Dutch|Italian|Ottoman|"
    r"Scandinavian|Soviet|US|Danish|Norwegian|Swiss|Austrian|British|Russian|Egyptian|Islamic|Buddhist|"
    r"Hindu|Jewish|Hebrew|Talmudic|Canon|canon|customary|religious|socialist) )?"
    r"(?:civil|common|customary|Islamic|religious|socialist|sharia|canon|Roman-Dutch|Napoleonic|Talmudic) law)\b")
TITLE_WORDS = set("""President Vice Prime Minister Queen King Emperor Empress Chancellor Federal Sultan Emir Amir
Sheikh Shaykh Sir Dame Governor General Governor-General Chairman Chairwoman Premier Chief Executive Supreme Leader
Ayatollah Grand Duke Duchess Prince Princess Pope Co-prince Co-princes Captain Captains Regent Administrator Mayor
Secretary State Council Commissioner Lieutenant Colonel Field Marshal Major Dr. Acting Interim Transitional Head
Deputy Crown Custodian Monsignor Archbishop Cardinal Bishop First Chair Chairperson Presidential Lord Mister
Mr. Mrs. Ms. Premier-Designate Senior Principal Commander High Representative Council's Territorial Assembly
Government Executive Officer Superintendent Commanding Officer Admiral Brigadier Minister-President Honorable
Tuanku Raja Yang Di-Pertuan Agong Mufti Ambassador Prefect Minister-Counselor Commandant Director Board
Presidency Representatives Gen. Lt. Col. Maj. Brig. Adm. Capt. Sgt.""".split())
_JUNK = {"other", "others", "none", "unspecified", "unknown", "na", "n/a", "mixed", "various", "etc", "and",
         "small", "note", "including", "frequent", "occasional", "but", "negligible", "minor", "some", "the", "no",
         "several", "many", "nil"}
_NUMBER = re.compile(r"(?<![\w.])[-+~<>]?(?:\d[\d,]*)?\.?\d+(?:\s*-\s*(?:\d[\d,]*)?\.?\d+)?"
                     r"(?:\s*(?:%|million|billion|sq km|km|m\b))?")
_NOTE = re.compile(r"(?:^|[;,.]\s*|\s)(?:note|notes)\b\s*(?:\d\s*)?[-:].*$", re.IGNORECASE | re.DOTALL)
_DATE = re.compile(r"\b(\d{1,2}) (January|February|March|April|May|June|July|August|September|October|"
                   r"November|December) (\d{3,4})\b")
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


# --- small text helpers ------------------------------------------------------------------------

def strip_parens(text: str) -> str:
    """Remove (nested) parentheticals and bracketed remarks."""
    previous = None
    while previous != text:
        previous = text
        text = re.sub(r"\([^()]*\)", " ", text)
        text = re.sub(r"\[[^\[\]]*\]", " ", text)
    return text.replace("(", " ").replace(")", " ")


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip(" .,;:-\"'*")


def split_top(text: str, separators: str = ",;") -> list[str]:
    """Split on separators (and ``++``) outside parentheses."""
    parts, depth, current = [], 0, []
    text = text.replace("++", ";" if ";" in separators else separators[0])
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        if ch in separators and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def cut_note(text: str) -> str:
    return _NOTE.sub("", text)


def clean_item(item: str, proper: bool, max_words: int = 5) -> str | None:
    """One list item as a label, or None when it does not look like a name."""
    item = squash(_NUMBER.sub(" ", strip_parens(item)))
    item = re.sub(r"^(?:and|or|&|also|mainly|mostly|including|especially|e\.g\.)\s+", "", item, flags=re.I)
    item = re.sub(r"\s+(?:est|and|or)$", "", item)
    item = squash(item)
    if not item or item.lower() in _JUNK or any(ch.isdigit() for ch in item):
        return None
    words = item.split()
    if len(words) > max_words or words[0].lower() in _JUNK or ":" in item or "/" in item and proper:
        return None
    if proper and not item[0].isupper():
        return None
    return item


def list_items(text: str, proper: bool, max_words: int = 5) -> list[str]:
    text = _NUMBER.sub(" ", cut_note(text).replace("++", ";"))
    seen, out = set(), []
    for part in split_top(text):
        label = clean_item(part, proper, max_words)
        if label and label.lower() not in seen:
            seen.add(label.lower())
            out.append(label)
    return out


def unshout(word: str, keep_roman: bool = True) -> str:
    """``HOLLANDE`` -> ``Hollande``; roman numerals (``ELIZABETH II``) stay."""
    if keep_roman and re.fullmatch(r"[IVXLC]+", word):
        return word
    return re.sub(r"[A-Z]{2,}", lambda m: m.group(0)[0] + m.group(0)[1:].lower(), word)


def person_name(text: str) -> str | None:
    """The first person named in an executive-branch entry, e.g. ``Francois Hollande``."""
    head = cut_note(text).split(";")[0]
    head = re.split(r"\(|\bsince\b|,| represented by ", head)[0]
    tokens = [t for t in head.replace('"', " ").split() if not re.fullmatch(r"'\w+'", t)]
    shouting = [i for i, t in enumerate(tokens) if re.fullmatch(r"[A-Z][A-Z'\-]+[A-Z]\.?|[A-Z]{2}", t.split("-")[-1])]
    if not shouting:
        return None
    first = shouting[0]
    run: list[str] = []  # given names before the surname
    for prev in reversed(tokens[:first]):
        if prev.lower() in {"of", "the", "for"}:
            # the run ended a title ("President of the Swiss Confederation Simonetta"): keep its last word
            run = run[-1:] if len(run) > 1 else []
            break
        if (prev in TITLE_WORDS or prev.lower() in {"and", "&"} or not prev[0].isupper()
                or prev.endswith("'s") or len(run) == 5):
            break
        run.insert(0, prev)
    run = run[-3:]
    start = first - len(run)
    end = first + 1
    while end < len(tokens) and (tokens[end][0].isupper() or tokens[end] in {"bin", "al", "ibn", "de", "da"}):
        if tokens[end] in TITLE_WORDS or tokens[end] in {"and"}:
            break
        end += 1
    words = [unshout(t, keep_roman=i > first) for i, t in enumerate(tokens[:end]) if i >= start]
    name = squash(" ".join(words))
    return name if name and len(name.split()) <= 6 else None


def date_literal(text: str) -> Literal | None:
    match = _DATE.search(text)
    if not match:
        return None
    day, month, year = int(match.group(1)), _MONTHS.index(match.group(2)) + 1, int(match.group(3))
    try:
        return Literal(dt.date(year, month, day).isoformat(), datatype=XSD.date)
    except ValueError:
        return None


# --- reading a profile -------------------------------------------------------------------------

@dataclass(frozen=True)
class EntityKey:
    kind: str
    label: str
    scope: str | None = None  # the country a city belongs to


Object = EntityKey | Literal


@dataclass
class Field:
    name: str
    text: str
    facts: list[tuple[EntityKey, str, Object]] = field(default_factory=list)


@dataclass
class Profile:
    code: str
    title: str
    region: str
    country: EntityKey
    aliases: set[str]
    sections: list[tuple[str, list[Field]]]


def field_text(value: dict) -> str:
    """The chunk text of a field: its own text, then ``subfield: text`` lines."""
    lines = []
    if value.get("text"):
        lines.append(value["text"].strip())
    for key, sub in value.items():
        if key != "text" and isinstance(sub, dict) and sub.get("text"):
            lines.append(f"{key}: {sub['text'].strip()}")
    return "\n".join(lines)


def texts(value: dict, want: Callable[[str], bool] = lambda key: key != "note") -> list[str]:
    """The texts of a field and of the subfields ``want`` accepts."""
    out = [value["text"]] if value.get("text") else []
    out += [sub["text"] for key, sub in value.items()
            if key != "text" and isinstance(sub, dict) and sub.get("text") and want(key)]
    return out


def primary_text(value: dict) -> list[str]:
    """The field's own text, or else its first subfield's (metropolitan France, not its overseas regions)."""
    found = texts(value)
    return found[:1]


def profile_title(code: str, data: dict) -> str:
    if code in TITLE_OVERRIDES:
        return TITLE_OVERRIDES[code]
    names = data.get("Government", {}).get("Country name") or {}
    for key in ("conventional short form", "English short form", "Dutch short form", "conventional long form"):
        text = squash(cut_note((names.get(key) or {}).get("text") or ""))
        if text and text.lower() != "none":
            return text
    return code.upper()


def profile_aliases(title: str, data: dict) -> set[str]:
    names = data.get("Government", {}).get("Country name") or {}
    aliases = {title}
    for key, sub in names.items():
        if key in ("former", "etymology", "abbreviation") or not isinstance(sub, dict) or not sub.get("text"):
            continue
        for part in cut_note(sub["text"]).split(";"):
            text = squash(part)
            if text and text.lower() != "none":
                aliases.add(text)
                aliases.add(squash(strip_parens(text)))
    return aliases


# Field extractors: (value, country title) -> [(relation slug, object)].
Extracted = list[tuple[str, Object]]


def _entities(relation: str, kind: str, labels: Iterable[str]) -> Extracted:
    return [(relation, EntityKey(kind, label)) for label in labels]


def _capital(value: dict, title: str) -> Extracted:
    text = ((value.get("name") or {}).get("text") or "").strip()
    text = re.split(r";?\s*note\b|:\s*note", text)[0]
    out: Extracted = []
    for part in text.split(";"):
        part = squash(re.sub(r"\s+in\s+[A-Z]\w+$", "", squash(strip_parens(part))))
        pieces = [squash(p) for p in part.split(",")]
        if any(len(p) <= 3 for p in pieces):  # "Washington, DC"
            pieces = [part]
        for piece in pieces:
            if piece and piece[0].isupper() and len(piece.split()) <= 5 and not any(c.isdigit() for c in piece):
                out.append(("capital", EntityKey("city", piece, title)))
    return out


def _borders(value: dict, title: str) -> Extracted:
    labels = [label for text in texts(value, lambda key: "border" in key) for label in
              list_items(re.sub(r"\bborder countries\b.*?:", "", text), proper=True)]
    return _entities("borders", "country", labels)


def _languages(value: dict, title: str) -> Extracted:
    out: Extracted = []
    for text in texts(value):
        for part in split_top(_NUMBER.sub(" ", cut_note(text))):
            part = re.sub(r"\s+(?:widely|commonly|also|less than|more than|mainly|mostly|only|spoken|understood|"
                          r"used)\b.*$", "", part)
            label = clean_item(part, proper=True, max_words=3)
            if label and not label.lower().endswith(("languages", "dialects", "language")):
                out.append(("language", EntityKey("language", label)))
                if re.search(r"\(\s*official", part):
                    out.append(("official-language", EntityKey("language", label)))
    return out


def _people_list(relation: str, kind: str, max_words: int = 4) -> Callable[[dict, str], Extracted]:
    def extract(value: dict, title: str) -> Extracted:
        labels = []
        for text in texts(value):
            for label in list_items(text, proper=True, max_words=max_words):
                label = re.sub(r"\s+(?:minority|minorities)$", "", label)
                if " with " not in label and " of " not in label.lower():
                    labels.append(label)
        return _entities(relation, kind, labels)
    return extract


def _plain_list(relation: str, kind: str, max_words: int = 4,
                source: Callable[[dict], list[str]] = texts) -> Callable[[dict, str], Extracted]:
    def extract(value: dict, title: str) -> Extracted:
        labels = [label for text in source(value) for label in list_items(text, proper=False, max_words=max_words)]
        return _entities(relation, kind, [label for label in labels if label[0].islower()
                                          and not re.search(r"\b(?:of the|world's)\b| - |^by ", label)])
    return extract


def _partners(relation: str) -> Callable[[dict, str], Extracted]:
    def extract(value: dict, title: str) -> Extracted:
        return _entities(relation, "country", [label for text in texts(value)
                                               for label in list_items(text, proper=True)])
    return extract


def _government_type(value: dict, title: str) -> Extracted:
    text = squash(strip_parens(cut_note(value.get("text") or "").split(";")[0]))
    text = re.sub(r"^(?:a|an)\s+", "", text)
    if not text or text.lower() in _JUNK or len(text.split()) > 6 or any(c.isdigit() for c in text):
        return []
    return [("government-type", EntityKey("government type", text))]


def _currency(value: dict, title: str) -> Extracted:
    for text in texts(value):
        match = (re.match(r"\s*(.+?)\s*\(([A-Z]{3})\)\s*per US dollar", text)
                 or re.match(r"\s*the\s+(.+?)\s+is used", text))
        if match:
            name = squash(strip_parens(match.group(1)))
            words = name.split()
            if words and len(words) <= 4 and not any(c.isdigit() for c in name):
                last = words[-1]
                if last.endswith("s") and not last.endswith(("ss", "us")):
                    words[-1] = last[:-1]
                return [("currency", EntityKey("currency", " ".join(words)))]
    return []


def _keywords(relation: str, kind: str, words: dict[str, str]) -> Callable[[dict, str], Extracted]:
    def extract(value: dict, title: str) -> Extracted:
        found: list[str] = []
        for text in primary_text(value):
            for word in re.findall(r"[A-Za-z-]+", cut_note(text).lower()):
                label = words.get(word)
                if label and label not in found:
                    found.append(label)
        return _entities(relation, kind, found)
    return extract


def _elevation(value: dict, title: str) -> Extracted:
    out: Extracted = []
    for key, relation in (("highest point", "highest-point"), ("lowest point", "lowest-point")):
        text = (value.get(key) or {}).get("text") or ""
        label = squash(_NUMBER.sub(" ", strip_parens(cut_note(text).split(";")[0])))
        if label and label[0].isupper() and len(label.split()) <= 6 and label.lower() not in _JUNK:
            out.append((relation, EntityKey("place", label)))
    return out


def _map_reference(value: dict, title: str) -> Extracted:
    labels = [label for text in primary_text(value) for label in list_items(text, proper=True, max_words=6)]
    return _entities("region", "region", [label for label in labels if "Map" not in label])


def _location(value: dict, title: str) -> Extracted:
    labels = []
    for text in primary_text(value):
        first = squash(strip_parens(text.split(",")[0].split(";")[0]))
        if first and first[0].isupper() and len(first.split()) <= 4 and not any(c.isdigit() for c in first):
            labels.append(first)
    return _entities("located-in", "region", labels)


def _legal_system(value: dict, title: str) -> Extracted:
    found: list[str] = []
    for text in texts(value):
        for match in LEGAL_SYSTEM.finditer(cut_note(text).split(";")[0]):
            label = match.group(1)
            label = label[0].lower() + label[1:] if label.split()[0] in {"Canon"} else label
            if label not in found:
                found.append(label)
    return _entities("legal-system", "legal system", found)


def _independence(value: dict, title: str) -> Extracted:
    text = value.get("text") or ""
    if text.lower().startswith(("none", "no official")):
        return []
    out: Extracted = []
    first = text.split(";")[0]
    date = date_literal(first)
    if date is not None:
        out.append(("independence-date", date))
    match = re.search(r"\(from (?:the )?([A-Z][^);,]+)", first)
    if match:
        out.append(("independent-from", EntityKey("country", squash(match.group(1)))))
    return out


def _executive(value: dict, title: str) -> Extracted:
    out: Extracted = []
    for key, relation in (("chief of state", "chief-of-state"), ("head of government", "head-of-government")):
        name = person_name((value.get(key) or {}).get("text") or "")
        if name:
            out.append((relation, EntityKey("person", name)))
    return out


def _urban_areas(value: dict, title: str) -> Extracted:
    out: Extracted = []
    for text in texts(value):
        for part in cut_note(text).split(";"):
            label = clean_item(unshout(squash(part)), proper=True, max_words=4)
            if label:
                out.append(("major-urban-area", EntityKey("city", label, title)))
    return out


def _dependent_areas(value: dict, title: str) -> Extracted:
    return _entities("dependent-area", "country", list_items(value.get("text") or "", proper=True))


def _literal(relation: str, pattern: str, datatype: NamedNode | None = None,
             convert: Callable[[str], str] = lambda s: s) -> Callable[[dict, str], Extracted]:
    def extract(value: dict, title: str) -> Extracted:
        texts_ = texts(value, lambda key: key in ("total", "adjective"))
        match = re.match(pattern, texts_[0]) if texts_ else None
        if not match:
            return []
        return [(relation, Literal(convert(match.group(1)), datatype=datatype))]
    return extract


def _official_name(value: dict, title: str) -> Extracted:
    text = squash(cut_note((value.get("conventional long form") or {}).get("text") or ""))
    return [("official-name", Literal(text))] if text and text.lower() != "none" and text != title else []


EXTRACTORS: dict[tuple[str, str], Callable[[dict, str], Extracted]] = {
    ("Government", "Capital"): _capital,
    ("Government", "Country name"): _official_name,
    ("Government", "Government type"): _government_type,
    ("Government", "Legal system"): _legal_system,
    ("Government", "Independence"): _independence,
    ("Government", "Executive branch"): _executive,
    ("Government", "Dependent areas"): _dependent_areas,
    ("Geography", "Land boundaries"): _borders,
    ("Geography", "Map references"): _map_reference,
    ("Geography", "Location"): _location,
    ("Geography", "Climate"): _keywords("climate", "climate", CLIMATE_WORDS),
    ("Geography", "Terrain"): _keywords("terrain", "terrain", TERRAIN_WORDS),
    ("Geography", "Natural resources"): _plain_list("natural-resource", "commodity", source=primary_text),
    ("Geography", "Natural hazards"): _plain_list("natural-hazard", "hazard", max_words=3, source=primary_text),
    ("Geography", "Elevation extremes"): _elevation,
    ("Geography", "Area"): _literal("area", r"\s*([\d,.]+ sq km)"),
    ("People and Society", "Languages"): _languages,
    ("People and Society", "Religions"): _people_list("religion", "religion"),
    ("People and Society", "Ethnic groups"): _people_list("ethnic-group", "ethnic group"),
    ("People and Society", "Major urban areas - population"): _urban_areas,
    ("People and Society", "Population"): _literal("population", r"\s*([\d,]+)\s*(?:\(|$)", XSD.integer,
                                                   lambda s: s.replace(",", "")),
    ("People and Society", "Nationality"): _literal("nationality", r"\s*([A-Z][\w ,'-]*?)\s*(?:\(|$)"),
    ("Economy", "Exchange rates"): _currency,
    ("Economy", "Exports - partners"): _partners("export-partner"),
    ("Economy", "Imports - partners"): _partners("import-partner"),
    ("Economy", "Exports - commodities"): _plain_list("export-commodity", "commodity"),
    ("Economy", "Imports - commodities"): _plain_list("import-commodity", "commodity"),
    ("Economy", "Industries"): _plain_list("industry", "commodity"),
    ("Economy", "Agriculture - products"): _plain_list("agricultural-product", "commodity"),
    ("Communications", "Internet country code"): _literal("internet-country-code", r"\s*(\.[a-z]{2})\b"),
}


def read_profile(path: Path) -> Profile:
    data = json.loads(path.read_text(encoding="utf-8"))
    code = path.stem
    title = profile_title(code, data)
    country = EntityKey("country", title)
    sections = []
    for section, fields in data.items():
        chunks = []
        for name, value in fields.items():
            if not isinstance(value, dict):
                continue
            text = field_text(value)
            if not text:
                continue
            chunk = Field(name, text)
            extract = EXTRACTORS.get((section, name))
            for relation, obj in extract(value, title) if extract else []:
                chunk.facts.append((country, relation, obj))
            chunks.append(chunk)
        if chunks:
            sections.append((section, chunks))
    return Profile(code, title, path.parent.name, country, profile_aliases(title, data), sections)


# --- from entity keys to IRIs ------------------------------------------------------------------

def resolve_countries(profiles: list[Profile]) -> None:
    """Point country-like names (borders, partners, places named like a profile) at the profiles' entities."""
    by_name: dict[str, EntityKey] = {}
    for profile in profiles:
        for alias in sorted(profile.aliases):
            by_name.setdefault(alias.lower(), profile.country)
    for profile in profiles:
        by_name[profile.title.lower()] = profile.country
    for alias, title in ALIASES.items():
        by_name.setdefault(alias.lower(), EntityKey("country", title))

    def lookup(label: str) -> EntityKey | None:
        label = re.sub(r"^St\. ", "Saint ", label)
        return by_name.get(label.lower()) or by_name.get(re.sub(r"^the ", "", label.lower()))

    def resolve(relation: str, obj: Object) -> list[Object]:
        if not isinstance(obj, EntityKey) or obj.kind not in ("country", "place", "region"):
            return [obj]
        found = lookup(obj.label)
        if found is not None:
            return [found]
        if obj.kind != "country":
            return [obj]
        if obj.label in CONTINENTS:
            return [EntityKey("region", obj.label)]
        parts = [lookup(part) for part in re.split(r",? and (?:the )?", obj.label)]
        if len(parts) > 1 and all(parts):
            return parts  # "China and Russia"
        plain = len(obj.label.split()) <= 3 and not re.search(r"\b[a-z]", obj.label)
        return [obj] if plain or relation != "independent-from" else []

    for profile in profiles:
        for _, chunks in profile.sections:
            for chunk in chunks:
                facts = [(s, p, o) for s, p, obj in chunk.facts for o in resolve(p, obj)]
                facts = [fact for fact in facts if fact[2] != fact[0]]
                # Borders are symmetric, and the reverse edge has the same source text.
                facts += [(o, p, s) for s, p, o in facts if p == "borders" and isinstance(o, EntityKey)]
                chunk.facts = list(dict.fromkeys(facts))


# On a slug clash the first kind here keeps the plain slug (``e:french`` is the language).
KIND_PRIORITY = ["country", "language", "religion", "region", "place", "commodity", "ethnic group", "city"]


def assign_iris(keys: Iterable[EntityKey]) -> dict[EntityKey, NamedNode]:
    """Slug of the label; on a clash the kind of highest priority keeps it, others get their kind or place."""
    groups: dict[str, list[EntityKey]] = defaultdict(list)
    for key in sorted(set(keys), key=lambda k: (k.kind, k.label, k.scope or "")):
        groups[slug(key.label)].append(key)

    def rank(kind: str) -> int:
        return KIND_PRIORITY.index(kind) if kind in KIND_PRIORITY else len(KIND_PRIORITY)

    iris = {}
    for base, members in groups.items():
        best = min(rank(m.kind) for m in members)
        for key in members:
            same_kind = sum(1 for m in members if m.kind == key.kind)
            if rank(key.kind) == best and (same_kind == 1 or key.kind == "country"):
                name = base
            elif same_kind == 1:
                name = f"{base}-{slug(key.kind)}"
            else:
                name = f"{base}-{slug(key.scope or key.kind)}"
            iris[key] = ENTITY[name]
    return iris


# --- quads ---------------------------------------------------------------------------------------

def page_text(chunks: list[Field]) -> str:
    return "\n\n".join(f"{chunk.name}\n{chunk.text}" for chunk in chunks)


def profile_quads(profile: Profile, iris: dict[EntityKey, NamedNode]) -> Iterator[Quad]:
    knowledge, source = vocab.collection_graph(COLLECTION), vocab.source_graph(COLLECTION)
    doc = vocab.document_iri(profile.code)
    yield from vocab.document_quads(source, doc, profile.title,
                                    source=f"CIA World Factbook: {profile.region}/{profile.code}.json")
    for page_no, (section, chunks) in enumerate(profile.sections, start=1):
        page = vocab.page_iri(profile.code, page_no)
        yield from vocab.page_quads(source, page, f"Page {page_no}", doc)
        yield Quad(page, DC.title, Literal(section), source)
        yield from vocab.content_quads(page, page_text(chunks), title=section)
        for chunk_no, chunk in enumerate(chunks, start=1):
            chunk_node = vocab.chunk_iri(profile.code, page_no, chunk_no)
            yield from vocab.chunk_quads(source, chunk_node, f"Chunk {chunk_no}", page)
            yield Quad(chunk_node, DC.title, Literal(chunk.name), source)
            yield from vocab.content_quads(chunk_node, chunk.text, title=chunk.name)
            if not chunk.facts:
                continue
            facts = [Triple(iris[s], RELATION[p], iris[o] if isinstance(o, EntityKey) else o)
                     for s, p, o in chunk.facts]
            yield from vocab.subgraph_quads(source, vocab.subgraph_iri(profile.code, page_no, chunk_no),
                                            chunk_node, facts)
            for fact in facts:
                yield Quad(fact.subject, fact.predicate, fact.object, knowledge)


def preferred_label(labels: Iterable[str]) -> str:
    """One label for spellings that share a slug: the least shouted (``Port of Spain``, not ``Port-Of-Spain``)."""
    return min(labels, key=lambda label: (-sum(ch.islower() for ch in label), -len(label), label))


def label_quads(iris: dict[EntityKey, NamedNode], used: set[NamedNode]) -> Iterator[Quad]:
    knowledge = vocab.collection_graph(COLLECTION)
    spellings: dict[NamedNode, set[str]] = defaultdict(set)
    for key, iri in iris.items():
        spellings[iri].add(key.label)
    for iri, labels in spellings.items():
        if iri in used:
            yield Quad(iri, RDFS.label, Literal(preferred_label(labels)), knowledge)
    for relation, label in RELATIONS.items():
        if RELATION[relation] in used:
            yield Quad(RELATION[relation], RDFS.label, Literal(label), knowledge)


def build(src: Path) -> list[Quad]:
    """Every quad of the sample dataset from the profiles under ``src``."""
    profiles = [read_profile(path) for path in sorted(src.glob("*/*.json"))]
    if not profiles:
        raise FileNotFoundError(f"{src}: no <region>/<code>.json profiles")
    resolve_countries(profiles)
    keys = [key for p in profiles for _, chunks in p.sections for c in chunks for s, _, o in c.facts
            for key in (s, o) if isinstance(key, EntityKey)]
    iris = assign_iris(keys + [p.country for p in profiles])
    quads = [quad for profile in profiles for quad in profile_quads(profile, iris)]
    knowledge = vocab.collection_graph(COLLECTION)
    used = {term for q in quads if q.graph_name == knowledge for term in (q.subject, q.predicate, q.object)}
    return quads + list(label_quads(iris, used))


def write_nquads(quads: Iterable[Quad], out: Path) -> int:
    """Sorted, de-duplicated gzip N-Quads with a fixed header, so the file is reproducible."""
    text = serialize(quads, format=RdfFormat.N_QUADS).decode("utf-8")
    lines = sorted(set(line for line in text.splitlines() if line))
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(("\n".join(lines) + "\n").encode("utf-8"))
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CIA World Factbook JSON -> gzip N-Quads with provenance")
    parser.add_argument("src", type=Path, help="the factbook directory (<region>/<code>.json)")
    parser.add_argument("out", type=Path, help="output file, e.g. data/factbook.nq.gz")
    args = parser.parse_args(argv)
    count = write_nquads(build(args.src), args.out)
    print(f"{args.out}: {count} quads", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
