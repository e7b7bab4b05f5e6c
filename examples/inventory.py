"""A small inventory tracker: reads stock records from CSV lines and reports totals."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field


@dataclass
class Item:
    sku: str
    name: str
    quantity: int
    unit_price: float
    tags: list[str] = field(default_factory=list)

    def value(self) -> float:
        return self.quantity * self.unit_price


def parse_line(line: str) -> Item:
    """Parse one CSV line: sku,name,quantity,unit_price[,tag;tag;...]."""
    row = next(csv.reader(io.StringIO(line)))
    if len(row) < 4:
        raise ValueError(f"expected at least 4 fields, got {len(row)}: {line!r}")
    sku, name, quantity, unit_price = row[:4]
    tags = row[4].split(";") if len(row) > 4 and row[4] else []
    return Item(sku.strip(), name.strip(), int(quantity), float(unit_price), tags)


class Inventory:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def load(self, text: str) -> int:
        count = 0
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            item = parse_line(line)
            self.items[item.sku] = item
            count += 1
        return count

    def restock(self, sku: str, amount: int) -> None:
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.items[sku].quantity += amount

    def sell(self, sku: str, amount: int) -> float:
        item = self.items[sku]
        if amount > item.quantity:
            raise ValueError(f"only {item.quantity} of {sku} left")
        item.quantity -= amount
        return amount * item.unit_price

    def total_value(self) -> float:
        return sum(item.value() for item in self.items.values())

    def with_tag(self, tag: str) -> list[Item]:
        return [item for item in self.items.values() if tag in item.tags]

    def low_stock(self, threshold: int = 5) -> list[Item]:
        return sorted(
            (item for item in self.items.values() if item.quantity < threshold),
            key=lambda item: item.quantity,
        )


def report(inventory: Inventory) -> str:
    lines = [f"{len(inventory.items)} items, total value {inventory.total_value():.2f}"]
    for item in inventory.low_stock():
        lines.append(f"  low: {item.sku} {item.name} ({item.quantity} left)")
    return "\n".join(lines)


if __name__ == "__main__":
    inv = Inventory()
    inv.load("A1,Widget,3,2.50,tools\nB2,Gadget,12,7.25,tools;gifts\nC3,Doohickey,1,19.99\n")
    print(report(inv))
