// The spider-rs side of the corpus benchmark (bench/corpus_bench.py): one crawl of SEED.
//
// npm's @spider-rs/spider-rs (its linux-x64-gnu build), installed under bench/_work/spider-rs
// (see bench/README.md); run with NODE_PATH=bench/_work/spider-rs/node_modules. robots.txt
// obeyed, no delay, at most MAX_PAGES pages (its budget); the concurrency is spider-rs's own
// default (the node binding has no setter for it). Each page reaches the callback, as a
// crawler's user code would see it; prints the pages and characters it saw as one JSON line
// (callbacks may still arrive after the crawl resolves: nginx's access log is the count).
//
//     node bench/spider_rs_crawl.js SEED MAX_PAGES
'use strict'
const { Website } = require('@spider-rs/spider-rs')

async function main() {
  const [seed, maxPages] = process.argv.slice(2)
  const website = new Website(seed)
    .withRespectRobotsTxt(true)
    .withBudget({ '*': Number(maxPages) })
    .withRequestTimeout(60000)
    .build()
  let pages = 0
  let chars = 0
  await website.crawl((err, page) => {
    if (err === null) {
      pages += 1
      chars += page.content.length
    }
  })
  console.log(JSON.stringify({ pages, chars }))
  // The binding keeps node alive for minutes after the crawl has resolved (seen with
  // 0.0.157): leave now, every request is done.
  process.exit(0)
}

main()
