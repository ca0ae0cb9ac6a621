"""Check digits for identifiers typed by people.

Each scheme here computes the digit (or character) appended to a number so
that a single mistyped digit, and most swaps of neighbouring digits, are
caught.  The functions accept strings so that leading zeros survive.

    >>> luhn_digit("7992739871")
    '3'
    >>> luhn_valid("79927398713")
    True
    >>> mod11_digit("030640615")
    '2'
"""

__all__ = ["luhn_digit", "luhn_valid", "mod11_digit", "mod11_valid",
           "mod97_valid", "strip_separators"]

_SEPARATORS = " -._/"


def strip_separators(text):
    """Remove the spaces, dashes, dots and slashes people type in numbers."""
    return "".join(ch for ch in text if ch not in _SEPARATORS)


def _digits(text):
    text = strip_separators(text)
    if not text or not text.isdigit():
        raise ValueError("expected digits, got %r" % text)
    return [int(ch) for ch in text]


def luhn_digit(partial):
    """The Luhn check digit for the digits in partial."""
    total = 0
    for pos, digit in enumerate(reversed(_digits(partial))):
        if pos % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return str((10 - total % 10) % 10)


def luhn_valid(number):
    """True if the last digit of number is its Luhn check digit."""
    number = strip_separators(number)
    if len(number) < 2:
        return False
    try:
        return luhn_digit(number[:-1]) == number[-1]
    except ValueError:
        return False


def mod11_digit(partial):
    """Weighted modulus-11 check character ("X" stands for ten).

    The weights count up from 2 at the rightmost digit, as many book and
    account numbering schemes do.
    """
    total = sum(d * w for d, w in zip(reversed(_digits(partial)), range(2, 100)))
    value = (11 - total % 11) % 11
    return "X" if value == 10 else str(value)


def mod11_valid(number):
    """True if number ends in its modulus-11 check character."""
    number = strip_separators(number).upper()
    if len(number) < 2:
        return False
    try:
        return mod11_digit(number[:-1]) == number[-1]
    except ValueError:
        return False


def _letters_to_digits(text):
    out = []
    for ch in text.upper():
        if ch.isdigit():
            out.append(ch)
        elif "A" <= ch <= "Z":
            out.append(str(ord(ch) - ord("A") + 10))
        else:
            raise ValueError("unexpected character %r" % ch)
    return "".join(out)


def mod97_valid(code, move=4):
    """Check a code whose remainder modulo 97 must be 1.

    The first `move` characters are moved to the end and letters become two
    digit numbers (A=10 ... Z=35) before the remainder is taken, which is how
    several account formats protect their numbers.
    """
    code = strip_separators(code)
    if len(code) <= move:
        return False
    try:
        number = _letters_to_digits(code[move:] + code[:move])
    except ValueError:
        return False
    return int(number) % 97 == 1


if __name__ == "__main__":
    for sample in ["7992739871", "4111 1111 1111 111", "030640615"]:
        print(sample, "luhn:", luhn_digit(sample), "mod11:", mod11_digit(sample))
    print(luhn_valid("79927398713"), luhn_valid("79927398710"))
