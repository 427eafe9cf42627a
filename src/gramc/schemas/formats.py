"""JSON Schema ``format`` values as regular languages over the DECODED string value.

Each known format is an ECMA-262 regex matched against the whole value (no anchors needed),
written from the defining RFC's grammar and checked against every string case of the
JSON-Schema-Test-Suite ``optional/format`` files (tests/test_schema_strings.py). A format is
*exact* when its regex accepts precisely the RFC language; the others are over-approximations
(they accept a documented superset) and are used only when the caller allows it:

========================  =======  ===========================================================
format                    exact    notes
========================  =======  ===========================================================
date                      yes      RFC 3339 full-date; days per month, Feb 29 only in leap years
time                      no/yes   RFC 3339 full-time, case-insensitive ``Z``; by default second
                                   60 is accepted at any minute (over-approximation); exact
                                   (60 only at 23:59 UTC, any offset) with exact_leap_seconds
date-time                 no/yes   RFC 3339 date-time, case-insensitive ``T`` and ``Z``; leap
                                   seconds as for time
duration                  yes      RFC 3339 Appendix A ABNF (designators upper case)
uuid                      yes      RFC 4122 8-4-4-4-12 hex digits, either case
ipv4                      yes      RFC 2673 dotted-quad, no leading zeros
ipv6                      yes      RFC 4291 text forms (RFC 3986 IPv6address), no zone id
email                     yes      RFC 5321 §4.1.2 Mailbox (dot-string or quoted local part,
                                   domain or address literal); no length limits (§4.5.3)
uri                       yes      RFC 3986 URI (ASCII)
uri-reference             yes      RFC 3986 URI-reference
iri                       yes      RFC 3987 IRI
iri-reference             yes      RFC 3987 IRI-reference
uri-template              yes      RFC 6570 URI Template (the ABNF of section 2, any level)
json-pointer              yes      RFC 6901
relative-json-pointer     yes      draft-handrews-relative-json-pointer-01
hostname                  no       RFC 1123 LDH labels of 1..63 characters; the 253-character
                                   total and the IDNA validity of ``xn--`` labels are not checked
========================  =======  ===========================================================

Every other name (``idn-email``, ``idn-hostname``, ``regex``, unknown names) gives None: the
schema walker treats it as an annotation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class FormatSpec:
    """A format's whole-value ECMA-262 regex, whether it is exact, and what it leaves out."""

    name: str
    pattern: str
    exact: bool
    note: str = ""


# ---------------------------------------------------------------- building blocks

_DIGIT = "[0-9]"
_HEX = "[0-9A-Fa-f]"

_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26]|00)00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = f"(?:[0-9]{{4}}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"

_HOUR = "(?:[01][0-9]|2[0-3])"
_MINUTE = "[0-5][0-9]"
_FRAC = "(?:\\.[0-9]+)?"
_NUM_OFFSET = f"[+-]{_HOUR}:{_MINUTE}"
_OFFSET = f"(?:[Zz]|{_NUM_OFFSET})"


def _leap_second_times() -> str:
    """``HH:MM:60(.frac)?OFFSET`` where HH:MM minus the offset is 23:59 UTC."""
    by_local: dict[int, list[str]] = {}
    for offset in range(24 * 60):
        text = f"{offset // 60:02d}:{offset % 60:02d}"
        by_local.setdefault((23 * 60 + 59 + offset) % 1440, []).append("\\+" + text)
        by_local.setdefault((23 * 60 + 59 - offset) % 1440, []).append("-" + text)
    by_local[23 * 60 + 59].append("[Zz]")
    alts = []
    for hour in range(24):
        minutes = []
        for minute in range(60):
            offsets = "|".join(by_local[hour * 60 + minute])
            minutes.append(f"{minute:02d}:60{_FRAC}(?:{offsets})")
        alts.append(f"{hour:02d}:(?:{'|'.join(minutes)})")
    return "(?:" + "|".join(alts) + ")"


def _time(exact_leap_seconds: bool) -> str:
    normal = f"{_HOUR}:{_MINUTE}:[0-5][0-9]{_FRAC}{_OFFSET}"
    if exact_leap_seconds:
        return f"(?:{normal}|{_leap_second_times()})"
    return f"{_HOUR}:{_MINUTE}:(?:[0-5][0-9]|60){_FRAC}{_OFFSET}"


_LEAP_NOTE = (
    "second 60 is accepted at every minute and offset, not only at 23:59 UTC "
    "(the exact form, exact_leap_seconds=True, needs about 66,000 DFA states)"
)


_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])"
_IPV4 = f"{_DEC_OCTET}(?:\\.{_DEC_OCTET}){{3}}"


def _ipv6() -> str:
    h16 = f"{_HEX}{{1,4}}"
    ls32 = f"(?:{h16}:{h16}|{_IPV4})"

    def groups(n: int) -> str:  # n times "h16:"
        return f"(?:{h16}:){{{n}}}" if n else ""

    def upto(n: int) -> str:  # [ *n( h16 ":" ) h16 ]
        return f"(?:(?:{h16}:){{0,{n}}}{h16})?" if n else f"(?:{h16})?"

    forms = [
        f"{groups(6)}{ls32}",
        f"::{groups(5)}{ls32}",
        f"(?:{h16})?::{groups(4)}{ls32}",
        f"{upto(1)}::{groups(3)}{ls32}",
        f"{upto(2)}::{groups(2)}{ls32}",
        f"{upto(3)}::{h16}:{ls32}",
        f"{upto(4)}::{ls32}",
        f"{upto(5)}::{h16}",
        f"{upto(6)}::",
    ]
    return "(?:" + "|".join(forms) + ")"


_IPV6 = _ipv6()

# RFC 3986 URIs; RFC 3987 IRIs are the same grammar with non-ASCII "ucschar" among the
# unreserved characters and "iprivate" allowed in queries.
_PCT = f"%{_HEX}{_HEX}"
_SUB_DELIMS = "!$&'()*+,;="
_SCHEME = "[A-Za-z][A-Za-z0-9+\\-.]*"
_UCSCHAR = "\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF" + "".join(
    f"\\u{{{plane:X}{0x1000 if plane == 0xE else 0:04X}}}-\\u{{{plane:X}FFFD}}" for plane in range(1, 0xF))
_IPRIVATE = "\\uE000-\\uF8FF\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}"


def _references(unreserved: str, private: str) -> tuple[str, str]:
    """(absolute, relative reference) of RFC 3986 (``unreserved`` a class body), or of RFC
    3987 with ``unreserved`` widened by ucschar and ``private`` allowed in queries."""
    pchar = f"(?:[{unreserved}{_SUB_DELIMS}:@]|{_PCT})"
    userinfo = f"(?:[{unreserved}{_SUB_DELIMS}:]|{_PCT})*"
    ip_literal = f"\\[(?:{_IPV6}|[vV]{_HEX}+\\.[A-Za-z0-9\\-._~{_SUB_DELIMS}:]+)\\]"
    reg_name = f"(?:[{unreserved}{_SUB_DELIMS}]|{_PCT})*"
    authority = f"(?:{userinfo}@)?(?:{ip_literal}|{_IPV4}|{reg_name})(?::[0-9]*)?"
    segment, segment_nz = f"{pchar}*", f"{pchar}+"
    segment_nz_nc = f"(?:[{unreserved}{_SUB_DELIMS}@]|{_PCT})+"
    path_abempty = f"(?:/{segment})*"
    path_absolute = f"/(?:{segment_nz}(?:/{segment})*)?"
    path_rootless = f"{segment_nz}(?:/{segment})*"
    path_noscheme = f"{segment_nz_nc}(?:/{segment})*"
    query = f"(?:{pchar}|[/?{private}])*"
    fragment = f"(?:{pchar}|[/?])*"
    hier_part = f"(?://{authority}{path_abempty}|{path_absolute}|{path_rootless}|)"
    relative_part = f"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme}|)"
    tail = f"(?:\\?{query})?(?:#{fragment})?"
    return f"{_SCHEME}:{hier_part}{tail}", f"{relative_part}{tail}"


_URI, _RELATIVE_REF = _references("A-Za-z0-9\\-._~", "")
_IRI, _IRELATIVE_REF = _references(f"A-Za-z0-9\\-._~{_UCSCHAR}", _IPRIVATE)

# RFC 6570 URI templates (any level: the ABNF of section 2; an apostrophe is a literal, as the
# JSON-Schema-Test-Suite has it, though the RFC's comment lists it among the exclusions)
_VARCHAR = f"(?:[A-Za-z0-9_]|{_PCT})"
_VARSPEC = f"{_VARCHAR}(?:\\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\\*)?"
_TEMPLATE_LITERAL = f"(?:[!#$&-;=?-\\[\\]_a-z~{_UCSCHAR}{_IPRIVATE}]|{_PCT})"
_URI_TEMPLATE = f"(?:{_TEMPLATE_LITERAL}|\\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\\}})*"

# RFC 5321 Mailbox
_ATEXT = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]"
_DOT_STRING = f"{_ATEXT}+(?:\\.{_ATEXT}+)*"
_QUOTED_STRING = '"(?:[ !#-\\[\\]-~]|\\\\[ -~])*"'
_LET_DIG = "[A-Za-z0-9]"
_SUB_DOMAIN = f"{_LET_DIG}(?:[A-Za-z0-9\\-]*{_LET_DIG})?"
_DOMAIN = f"{_SUB_DOMAIN}(?:\\.{_SUB_DOMAIN})*"
_SNUM = "(?:25[0-5]|2[0-4][0-9]|[01][0-9]{2}|[0-9]{1,2})"
_ADDRESS_LITERAL = f"\\[(?:{_SNUM}(?:\\.{_SNUM}){{3}}|IPv6:{_IPV6})\\]"
_EMAIL = f"(?:{_DOT_STRING}|{_QUOTED_STRING})@(?:{_DOMAIN}|{_ADDRESS_LITERAL})"

# RFC 1123 host names (LDH labels); a label may have "--" in positions 3-4 only as "xn--"
_LABEL_CHAR = "[A-Za-z0-9]"
_LABEL_LONG = (
    f"(?:[Xx][Nn]--[A-Za-z0-9\\-]{{0,58}}{_LABEL_CHAR}"  # an A-label (5..63 characters)
    f"|{_LABEL_CHAR}{{2}}(?:[A-Za-z0-9]-|-[A-Za-z0-9]|[A-Za-z0-9]{{2}})[A-Za-z0-9\\-]{{0,58}}{_LABEL_CHAR}"
    f"|{_LABEL_CHAR}(?:[A-Za-z0-9\\-]{{0,2}}{_LABEL_CHAR})?)"  # 1..4 characters
)
_HOSTNAME = f"{_LABEL_LONG}(?:\\.{_LABEL_LONG})*"

# RFC 6901 / relative JSON pointer
_JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"
_RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"

# RFC 3339 Appendix A
_DUR_SECOND = "[0-9]+S"
_DUR_MINUTE = f"[0-9]+M(?:{_DUR_SECOND})?"
_DUR_HOUR = f"[0-9]+H(?:{_DUR_MINUTE})?"
_DUR_TIME = f"T(?:{_DUR_HOUR}|{_DUR_MINUTE}|{_DUR_SECOND})"
_DUR_DAY = "[0-9]+D"
_DUR_MONTH = f"[0-9]+M(?:{_DUR_DAY})?"
_DUR_YEAR = f"[0-9]+Y(?:{_DUR_MONTH})?"
_DUR_DATE = f"(?:{_DUR_DAY}|{_DUR_MONTH}|{_DUR_YEAR})(?:{_DUR_TIME})?"
_DURATION = f"P(?:{_DUR_DATE}|{_DUR_TIME}|[0-9]+W)"

_UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"


@cache
def _specs(exact_leap_seconds: bool) -> dict[str, FormatSpec]:
    time = _time(exact_leap_seconds)
    exact, note = (True, "") if exact_leap_seconds else (False, _LEAP_NOTE)
    specs = [
        FormatSpec("date", _DATE, True),
        FormatSpec("time", time, exact, note),
        FormatSpec("date-time", f"{_DATE}[Tt]{time}", exact, note),
        FormatSpec("duration", _DURATION, True),
        FormatSpec("uuid", _UUID, True),
        FormatSpec("ipv4", _IPV4, True),
        FormatSpec("ipv6", _IPV6, True),
        FormatSpec("email", _EMAIL, True, "RFC 5321 size limits (64-octet local part...) not checked"),
        FormatSpec("uri", _URI, True),
        FormatSpec("uri-reference", f"(?:{_URI}|{_RELATIVE_REF})", True),
        FormatSpec("iri", _IRI, True),
        FormatSpec("iri-reference", f"(?:{_IRI}|{_IRELATIVE_REF})", True),
        FormatSpec("uri-template", _URI_TEMPLATE, True),
        FormatSpec("json-pointer", _JSON_POINTER, True),
        FormatSpec("relative-json-pointer", _RELATIVE_JSON_POINTER, True),
        FormatSpec(
            "hostname",
            _HOSTNAME,
            False,
            "the 253-character total length and the IDNA validity of xn-- labels are not checked",
        ),
    ]
    return {s.name: s for s in specs}


#: The names :func:`format_spec` knows.
KNOWN_FORMATS = ("date", "time", "date-time", "duration", "uuid", "ipv4", "ipv6", "email",
                 "uri", "uri-reference", "iri", "iri-reference", "uri-template", "json-pointer",
                 "relative-json-pointer", "hostname")


def format_spec(name: str, *, exact_leap_seconds: bool = False) -> FormatSpec | None:
    """The spec of format ``name`` (exact or not), or None when gramc does not know it.

    ``exact_leap_seconds`` selects the exact (and large) ``time``/``date-time`` regex; by
    default they are over-approximations that accept second 60 at any minute.
    """
    return _specs(exact_leap_seconds).get(name)


def format_pattern(
    name: str, *, allow_approximate: bool = False, exact_leap_seconds: bool = False
) -> str | None:
    """The whole-value ECMA-262 regex of format ``name``; None for unknown formats and (unless
    ``allow_approximate``) for formats gramc can only over-approximate."""
    spec = format_spec(name, exact_leap_seconds=exact_leap_seconds)
    if spec is None or (not spec.exact and not allow_approximate):
        return None
    return spec.pattern
