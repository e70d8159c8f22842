"""Real-looking personal data and credentials for the PII screen's tests, each valid by the
rule a real one obeys (Luhn, SSA ranges, IBAN mod 97, NANP, vendor key shapes), drawn from a
``random.Random`` so hypothesis and fixed-seed tests share them."""

from __future__ import annotations

import base64
import json
import random
import string

ALNUM = string.ascii_letters + string.digits


def luhn_check_digit(partial: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(partial)):
        d = int(ch)
        if i % 2 == 0:  # doubled: the check digit will sit to the right of these
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def card(rng: random.Random) -> str:
    """A Luhn-valid Visa, Mastercard or Amex number, grouped as printed (or not)."""
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("37", 15)])
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    number = body + luhn_check_digit(body)
    sep = rng.choice(["", " ", "-"])
    groups = (
        [number[:4], number[4:10], number[10:]]
        if length == 15
        else [number[i : i + 4] for i in range(0, 16, 4)]
    )
    return sep.join(groups)


def ssn(rng: random.Random) -> str:
    """A number the SSA could issue: area 001-899 but 666, group 01-99, serial 0001-9999."""
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def iban(rng: random.Random) -> str:
    """A German or British IBAN with valid mod-97 check digits, grouped by four."""
    country = rng.choice(["DE", "GB"])
    if country == "DE":
        bban = "".join(rng.choice(string.digits) for _ in range(18))
    else:
        bank = "".join(rng.choice(string.ascii_uppercase) for _ in range(4))
        bban = bank + "".join(rng.choice(string.digits) for _ in range(14))
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    code = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    return " ".join(code[i : i + 4] for i in range(0, len(code), 4))


def iban_valid(code: str) -> bool:
    compact = code.replace(" ", "")
    numeric = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
    return int(numeric) % 97 == 1


def email(rng: random.Random) -> str:
    user = rng.choice(["jane", "j.smith", "alex_k", "m.garcia", "sam+memo", "li.wei"])
    domain = rng.choice(["example.com", "mail.co.uk", "corp-mail.io", "uni.edu", "web.de"])
    return f"{user}{rng.randint(1, 999)}@{domain}"


def phone(rng: random.Random) -> str:
    """A US number in an assigned area code, written as people write them."""
    area = rng.choice([212, 312, 415, 617, 646, 702, 206, 303, 404, 512])
    exchange = rng.choice([n for n in range(200, 1000) if n % 100 != 11 and n != 555])
    line = rng.randint(0, 9999)
    style = rng.choice(
        ["({a}) {e}-{l}", "{a}-{e}-{l}", "+1 {a} {e} {l}", "+1-{a}-{e}-{l}", "{a}.{e}.{l}"]
    )
    return style.format(a=area, e=exchange, l=f"{line:04d}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def api_key(rng: random.Random) -> tuple[str, str]:
    """A credential and the entity type it is reported as."""

    def chars(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    kind = rng.choice(["aws", "github", "openai", "slack", "stripe", "google", "jwt", "pem"])
    if kind == "aws":
        return "AKIA" + chars(string.ascii_uppercase + "234567", 16), "API_KEY"
    if kind == "github":
        return "ghp_" + chars(ALNUM, 36), "API_KEY"
    if kind == "openai":
        return "sk-proj-" + chars(ALNUM, 48), "API_KEY"
    if kind == "slack":
        return f"xoxb-{chars(string.digits, 12)}-{chars(string.digits, 13)}-{chars(ALNUM, 24)}", (
            "API_KEY"
        )
    if kind == "stripe":
        return "sk_live_" + chars(ALNUM, 24), "API_KEY"
    if kind == "google":
        return "AIza" + chars(ALNUM + "_-", 35), "API_KEY"
    if kind == "jwt":
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps({"sub": chars(string.digits, 8), "iat": 1700000000}).encode())
        return f"{header}.{payload}.{_b64(rng.randbytes(32))}", "JWT"
    body = "\n".join(chars(ALNUM + "+/", 64) for _ in range(4))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----", "PRIVATE_KEY"


#: ``(value generator, entity type, sentences with {} where the value goes)``.
KINDS = {
    "card": (card, "CREDIT_CARD", ["Please charge my card {} for the renewal.", "card: {}"]),
    "ssn": (ssn, "US_SSN", ["My SSN is {} if the form asks.", "social security number {}"]),
    "iban": (iban, "IBAN_CODE", ["Send the refund to IBAN {} please.", "account {}, thanks"]),
    "email": (email, "EMAIL_ADDRESS", ["Write to {} about the invoice.", "contact: {}"]),
    "phone": (phone, "PHONE_NUMBER", ["Call me on {} after six.", "my cell is {}"]),
}


def sentence(rng: random.Random, kind: str) -> tuple[str, str, str]:
    """``(text, value, entity type)``: a value of ``kind`` embedded in a sentence."""
    if kind == "api_key":
        value, entity = api_key(rng)
        template = rng.choice(["My key is {} so use it.", "Use this key:\n{}\nfor the deploy."])
        return template.format(value), value, entity
    make, entity, templates = KINDS[kind]
    value = make(rng)
    return rng.choice(templates).format(value), value, entity


def ordinary(rng: random.Random) -> str:
    """A sentence with numbers, dates and versions but nothing personal."""
    templates = [
        "I have {n} cats and {m} dogs.",
        "The meeting moved to {y}-{mo:02d}-{d:02d} at {h:02d}:{mi:02d}.",
        "Upgrade to version {a}.{b}.{c} before Friday.",
        "The train leaves at {h}:{mi:02d} from platform {n}.",
        "It costs ${n}.{m:02d} and ships in {d} days.",
        "Chapter {n}, page {p}: the {y} edition.",
        "Python {a}.{b} dropped support in {y}.",
        "We measured {n}.{m} ms at the 95th percentile over {p} runs.",
        "Founded on {d}/{mo}/{y}, the club moved {n} times.",  # a birth date is personal
        "Order {n} of {p} arrived; {m}% were damaged.",
    ]
    return rng.choice(templates).format(
        n=rng.randint(0, 99),
        m=rng.randint(0, 99),
        p=rng.randint(100, 999),
        y=rng.randint(1950, 2030),
        mo=rng.randint(1, 12),
        d=rng.randint(1, 28),
        h=rng.randint(0, 23),
        mi=rng.randint(0, 59),
        a=rng.randint(0, 20),
        b=rng.randint(0, 30),
        c=rng.randint(0, 99),
    )
