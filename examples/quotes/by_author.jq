# Quotes grouped by author, from the quotes example's JSONL export (read with jq --slurp):
#   jq --slurp --from-file examples/quotes/by_author.jq quotes.jsonl
# One object per author: the author item's fields and "quotes", the texts of their quotes.
(map(select(.type == "author")) | INDEX(.key)) as $authors
| map(select(.type == "quote"))
| group_by(.author_key)
| map(($authors[.[0].author_key] // {name: .[0].author})
      + {quotes: map(.text) | sort})
| sort_by(.name)
| map(del(.type))
