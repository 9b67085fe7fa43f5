"""The handwritten half of lionmsg: the behaviour behind the generated classes (envelope rules, the
history, observers, the Exchange) and the shared helpers they use. Its public names are re-exported by
`lionmsg`; import them from there."""
