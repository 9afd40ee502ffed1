/** A bounded queue read as an async iterator: `push` items, `end` it (with an error or not). */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  private items: T[] = [];
  private waiters: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }[] = [];
  private ended: { error?: unknown } | null = null;

  constructor(
    private readonly bound = 4096,
    private readonly onReturn: () => void = () => {},
  ) {}

  /** Adds an item; false (and the item dropped) when the queue holds `bound` already. */
  push(item: T): boolean {
    if (this.ended) return false;
    const w = this.waiters.shift();
    if (w) {
      w.resolve({ value: item, done: false });
      return true;
    }
    if (this.items.length >= this.bound) return false;
    this.items.push(item);
    return true;
  }

  end(error?: unknown): void {
    if (this.ended) return;
    this.ended = error === undefined ? {} : { error };
    for (const w of this.waiters.splice(0)) {
      if (error === undefined) w.resolve({ value: undefined, done: true });
      else w.reject(error);
    }
  }

  next(): Promise<IteratorResult<T>> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve({ value: item, done: false });
    if (this.ended) {
      return this.ended.error === undefined ? Promise.resolve({ value: undefined, done: true }) : Promise.reject(this.ended.error);
    }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    this.onReturn();
    this.end();
    this.items = [];
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
