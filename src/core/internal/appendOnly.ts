import { Equal, Hash } from "effect"

/**
 * An immutable sequence that only grows, with O(1) amortised `append` and sharing between
 * versions: a version owns the backing array while it is the longest one, and appending to
 * an older version copies its prefix first. Folds append to the newest state almost always,
 * so they never copy; an old state stays valid because it only ever reads its own prefix.
 */
export class AppendOnly<A> implements Iterable<A>, Equal.Equal {
  private constructor(
    private readonly items: Array<A>,
    readonly length: number
  ) {}

  static empty<A>(): AppendOnly<A> {
    return new AppendOnly<A>([], 0)
  }

  static from<A>(values: Iterable<A>): AppendOnly<A> {
    const items = Array.from(values)
    return new AppendOnly(items, items.length)
  }

  /** The array itself, without a copy: the caller hands it over and never changes it again. */
  static adopt<A>(items: Array<A>): AppendOnly<A> {
    return new AppendOnly(items, items.length)
  }

  append(value: A): AppendOnly<A> {
    const items = this.items.length === this.length ? this.items : this.items.slice(0, this.length)
    items.push(value)
    return new AppendOnly(items, this.length + 1)
  }

  at(index: number): A | undefined {
    return index >= 0 && index < this.length ? this.items[index] : undefined
  }

  /** The first element satisfying `predicate`. */
  find(predicate: (value: A) => boolean): A | undefined {
    for (let i = 0; i < this.length; i++) {
      const value = this.items[i]!
      if (predicate(value)) return value
    }
    return undefined
  }

  toArray(): Array<A> {
    return this.items.slice(0, this.length)
  }

  *[Symbol.iterator](): Iterator<A> {
    for (let i = 0; i < this.length; i++) yield this.items[i]!
  }

  [Equal.symbol](that: Equal.Equal): boolean {
    if (!(that instanceof AppendOnly) || that.length !== this.length) return false
    for (let i = 0; i < this.length; i++) {
      if (!Equal.equals(this.items[i], that.items[i])) return false
    }
    return true
  }

  [Hash.symbol](): number {
    let hash = Hash.number(this.length)
    for (let i = 0; i < this.length; i++) hash = Hash.combine(Hash.hash(this.items[i]))(hash)
    return Hash.cached(this, hash)
  }
}
