"""``dppca ledger init|show|verify|head`` and the ledger options of ``dppca
fit``."""

import os
import sys

from ._cli_args import _positive, _probability


def ledger_init(args):
    from .privacy import BudgetAccountant

    if os.path.exists(args.file):
        raise ValueError(f"{args.file} already exists; a ledger is created once "
                         "(its budget is fixed); use another file name")
    ledger = BudgetAccountant(args.epsilon, args.delta, path=args.file)
    if not ledger._ledger.created:  # made by another process meanwhile
        raise ValueError(f"{args.file} already exists; a ledger is created once "
                         "(its budget is fixed); use another file name")
    print(f"created ledger {args.file}: budget epsilon={args.epsilon:g} at "
          f"delta={args.delta:g}")
    print(f"anchor: {ledger.anchor()}")
    return 0


def ledger_show(args, out=None):
    from ._accounting import _compose
    from .privacy import BudgetAccountant

    out = sys.stdout if out is None else out
    ledger = BudgetAccountant(path=args.file)  # verifies the chain
    # one read: the table, the totals and the anchor of the same rows (a
    # charge by another process meanwhile is in all of them or in none)
    charges = ledger._ledger.rows()
    totals = _compose(charges)
    print(f"ledger {ledger.path}: budget epsilon={ledger.epsilon:g} at "
          f"delta={ledger.delta:g}", file=out)
    rows = [("#", "time (UTC)", "estimator", "fit epsilon", "fit delta",
             "total epsilon", "label")]
    for c in charges:
        fit_eps, fit_delta = (c["params"].get(k, "") for k in ("epsilon", "delta"))
        cells = (str(c["seq"]), c["time"], c["estimator"] or "-",
                 f"{fit_eps:g}" if isinstance(fit_eps, float) else str(fit_eps),
                 f"{fit_delta:g}" if isinstance(fit_delta, float) else str(fit_delta),
                 f"{c['epsilon_spent']:.6g}", c["label"] or "")
        # whatever a charge recorded (an estimator's name or parameters
        # too), never lines or terminal escapes of its own
        rows.append(tuple(_printable(cell) for cell in cells))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip(), file=out)
    eps, delta = ledger._total(totals)
    left = ledger._remaining_fits(1, totals)
    head = charges[-1]["hash"] if charges else ledger._ledger.header["genesis"]
    print(f"spent: epsilon={eps:.6g} at delta={delta:g} in {len(charges)} "
          f"charge(s); remaining: epsilon={left:.6g} for one more Gaussian fit",
          file=out)
    print(f"anchor: {len(charges)}:{head}", file=out)
    return 0


def _printable(label):
    """A label as one line of text: one with control characters (a newline,
    a terminal escape) shown as its Python literal, so that no label can
    print lines of its own."""
    return label if label.isprintable() else repr(label)


def ledger_verify(args):
    from ._ledger import parse_anchor
    from .privacy import BudgetAccountant

    if args.anchor is not None:
        parse_anchor(args.anchor)  # a malformed anchor before the file
    ledger = BudgetAccountant(path=args.file)  # raises, naming the row
    ledger.verify(anchor=args.anchor)  # raises if it does not extend it
    # Read after: it extends what verify read (else it raises), so the
    # anchor given too; its count and hash come from one read.
    head = ledger.anchor()
    extends = ""
    if args.anchor is not None:
        count = parse_anchor(args.anchor)[0]
        extends = (" and extends the anchor" if count is None else
                   f" and extends the anchor taken at {count} charge(s)")
    print(f"ledger {ledger.path}: {head.split(':')[0]} charge(s), hash chain "
          f"intact{extends}; anchor: {head}")
    return 0


def ledger_head(args):
    from .privacy import BudgetAccountant

    print(BudgetAccountant(path=args.file).anchor())  # verifies the chain
    return 0


def _add_ledger_commands(commands, fit):
    """``dppca ledger ...`` and the ledger options of ``dppca fit``."""
    fit.add_argument("--ledger", metavar="FILE",
                     help="charge the fit to this budget ledger (see 'dppca "
                     "ledger'); refused before the data is read if over budget")
    fit.add_argument("--label", metavar="TEXT",
                     help="label recorded with the ledger charge (default: "
                     "'dppca fit DATA')")
    fit.add_argument("--force", action="store_true",
                     help="overwrite an existing MODEL file")
    ledger = commands.add_parser(
        "ledger", help="create, show, verify or anchor a privacy-budget ledger",
        description="A ledger is a SQLite file holding a budget (epsilon, delta) "
        "and every fit charged to it, hash-chained; share one per dataset. "
        "Store its anchor ('ledger head') where the file's writers cannot "
        "change it: 'ledger verify --anchor' then detects a rolled-back or "
        "replaced ledger, which the chain alone cannot.",
    )
    actions = ledger.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="create a ledger with its budget")
    init.add_argument("file", metavar="FILE")
    init.add_argument("--epsilon", metavar="E", type=_positive, required=True,
                      help="total epsilon of every fit charged to the ledger")
    init.add_argument("--delta", metavar="D", type=_probability, required=True,
                      help="delta at which the budget is stated")
    init.set_defaults(run=ledger_init)
    for name, run, text in (
        ("show", ledger_show, "print the charges, spent and remaining budget"),
        ("verify", ledger_verify, "check the hash chain; name the first bad row"),
        ("head", ledger_head, "print the anchor (N:HASH) to store elsewhere"),
    ):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument("file", metavar="FILE")
        action.set_defaults(run=run)
        if name == "verify":
            action.add_argument(
                "--anchor", metavar="N:HASH",
                help="also check that the ledger extends this anchor (printed "
                "by 'ledger head' earlier): detects charges removed or the "
                "ledger replaced")
