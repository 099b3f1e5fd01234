import ObservableDefaults

/// `key-names`: key names spelled for the text layers by `LayerKeyNames`
/// (`Sources/ObservableDefaults/Layers/LayerText.swift`): `kebabCase` (`--max-http-connections`)
/// and `variableName(prefix:key:)` (`PLAYER_MAX_HTTP_CONNECTIONS`).
///
/// Input format: the bytes are the key's name, read as UTF-8 (an invalid sequence reads as
/// U+FFFD).
///
/// Checked: no trap; spelling an already-spelled name again changes nothing (kebab-case of
/// kebab-case, a variable's name of a variable's name); and the chain camelCase → kebab-case →
/// `PREFIX_SNAKE_CASE` gives the variable the key itself gives.
enum KeyNamesTarget {
    @Sendable static func run(_ bytes: [UInt8]) throws(FuzzFailure) {
        let name = String(decoding: bytes, as: UTF8.self)
        let kebab = LayerKeyNames.kebabCase(name)
        let kebabAgain = LayerKeyNames.kebabCase(kebab)
        try require(
            kebabAgain == kebab, "kebab-case of \(name.debugDescription) is \(kebab.debugDescription), then \(kebabAgain.debugDescription)")
        let variable = LayerKeyNames.variableName(prefix: "", key: name)
        let variableAgain = LayerKeyNames.variableName(prefix: "", key: variable)
        try require(
            variableAgain == variable,
            "the variable of \(name.debugDescription) is \(variable.debugDescription), then \(variableAgain.debugDescription)")
        let prefixed = LayerKeyNames.variableName(prefix: "APP", key: name)
        let throughKebab = LayerKeyNames.variableName(prefix: "APP", key: kebab)
        try require(
            throughKebab == prefixed,
            "the variable of \(name.debugDescription) is \(prefixed.debugDescription), of its kebab-case \(throughKebab.debugDescription)")
    }
}
