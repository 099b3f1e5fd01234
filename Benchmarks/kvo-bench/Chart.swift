import Foundation

// MARK: What a chart is made of

/// A family of scaling scenarios sharing a numeric parameter: one panel of the `--svg` chart.
///
/// A scenario joins a curve by carrying a `ChartPoint` of a family (its parameter and series); every
/// family with at least two measured parameter values gets a panel, in the order the families first
/// appear in the scenario list. A new family needs nothing but a `ChartFamily` value.
struct ChartFamily: Hashable {
    /// Identifies the family (panels are grouped by it).
    let id: String
    let title: String
    /// The parameter, with its unit, e.g. "observers on the key".
    let xAxis: String
    /// What is plotted, with its unit.
    var yAxis: String = "ns per set (p50)"
    /// Logarithmic for parameters spanning decades (1–1,000 observers); linear for a few small
    /// integers (tree depth 1–6).
    var xIsLogarithmic = true

    static let observers = ChartFamily(
        id: "observers", title: "One set vs observers of the key", xAxis: "observers of the key")
    static let observedKeys = ChartFamily(
        id: "observed-keys", title: "One set vs observed keys of the object", xAxis: "observed keys (the one set is observed last)")
    static let objects = ChartFamily(
        id: "objects", title: "One set vs observed objects", xAxis: "objects, 1 observer each (sets go round them)")
    static let progressTreeDepth = ChartFamily(
        id: "progress-depth", title: "Leaf increment vs progress tree depth", xAxis: "tree depth (levels)",
        yAxis: "ns per increment (p50)", xIsLogarithmic: false)
}

/// The names of the implementations, one curve (and one colour) each across all panels.
enum ChartSeries {
    static let keyValueObserving = "KeyValueObserving (observe)"
    static let notificationCenter = "NotificationCenter (post)"
    static let observation = "Observation (withObservationTracking, re-armed)"
    static let foundationProgress = "Foundation Progress"
}

/// Where a scenario's p50 goes on the chart.
struct ChartPoint {
    let family: ChartFamily
    let series: String
    /// The family's parameter for this scenario (observers, keys, objects, depth).
    let x: Double

    init(_ family: ChartFamily, _ series: String, x: Double) {
        self.family = family
        self.series = series
        self.x = x
    }
}

// MARK: Drawing

/// Whether `scenarios` draw a curve on the `--svg` chart: a family with two parameter values (what
/// `scalingChartSVG` needs to draw a panel).
func drawCurve(_ scenarios: [Scenario]) -> Bool {
    Dictionary(grouping: scenarios.flatMap(\.chart), by: \.family).values.contains { Set($0.map(\.x)).count >= 2 }
}

/// The `--svg` chart: one panel per family with at least two parameter values, log-scale y axis,
/// one line per series with a shared legend. Dependency-free SVG 1.1.
func scalingChartSVG(_ rows: [ReportRow], subtitle: String) -> String? {
    struct Panel {
        let family: ChartFamily
        var series: [String: [(x: Double, y: Double, scenario: String)]] = [:]
    }
    var panels: [Panel] = []
    var seriesOrder: [String] = []
    for row in rows {
        for point in row.scenario.chart {
            if !seriesOrder.contains(point.series) { seriesOrder.append(point.series) }
            let index =
                panels.firstIndex { $0.family == point.family }
                ?? {
                    panels.append(Panel(family: point.family))
                    return panels.count - 1
                }()
            panels[index].series[point.series, default: []].append((point.x, row.measurement.p50, row.scenario.name))
        }
    }
    panels = panels.filter { Set($0.series.values.flatMap { $0.map(\.x) }).count >= 2 }
    guard !panels.isEmpty else { return nil }
    let usedSeries = seriesOrder.filter { name in panels.contains { $0.series[name] != nil } }

    let panelWidth = 470.0, panelHeight = 330.0, columns = panels.count == 1 ? 1 : 2
    let legendTop = 62.0, legendRowHeight = 20.0
    let legendRows = legendLayout(usedSeries, width: Double(columns) * panelWidth - 40)
    let panelsTop = legendTop + Double(legendRows.count) * legendRowHeight + 10
    let width = Double(columns) * panelWidth
    let height = panelsTop + Double((panels.count + columns - 1) / columns) * panelHeight + 10

    var svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(int(width))" height="\(int(height))" \
        viewBox="0 0 \(int(width)) \(int(height))" font-family="Helvetica, Arial, sans-serif" font-size="12">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(int(width / 2))" y="24" text-anchor="middle" font-size="16" font-weight="bold">\
        kvo-bench: how the cost of one operation grows (p50, log scale)</text>
        <text x="\(int(width / 2))" y="44" text-anchor="middle" fill="#555">\(escape(subtitle))</text>

        """
    for (rowIndex, legendRow) in legendRows.enumerated() {
        let y = legendTop + Double(rowIndex) * legendRowHeight
        for (name, x) in legendRow {
            let colour = palette[usedSeries.firstIndex(of: name)! % palette.count]
            svg +=
                "<line x1=\"\(fmt(20 + x))\" y1=\"\(fmt(y))\" x2=\"\(fmt(44 + x))\" y2=\"\(fmt(y))\" stroke=\"\(colour)\" stroke-width=\"2.5\"/>"
            svg += "<circle cx=\"\(fmt(32 + x))\" cy=\"\(fmt(y))\" r=\"3.5\" fill=\"\(colour)\"/>"
            svg += "<text x=\"\(fmt(50 + x))\" y=\"\(fmt(y + 4))\">\(escape(name))</text>\n"
        }
    }
    for (index, panel) in panels.enumerated() {
        let left = Double(index % columns) * panelWidth
        let top = panelsTop + Double(index / columns) * panelHeight
        svg += drawPanel(
            panel.family, panel.series, seriesOrder: usedSeries,
            frame: (left + 78, top + 30, panelWidth - 78 - 22, panelHeight - 30 - 58))
    }
    return svg + "</svg>\n"
}

private let palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]

/// Lays the legend entries out in rows no wider than `width`: each entry's name and x offset.
private func legendLayout(_ names: [String], width: Double) -> [[(String, Double)]] {
    var rows: [[(String, Double)]] = [[]]
    var x = 0.0
    for name in names {
        let entryWidth = 50 + Double(name.count) * 6.6 + 24
        if x > 0 && x + entryWidth > width {
            rows.append([])
            x = 0
        }
        rows[rows.count - 1].append((name, x))
        x += entryWidth
    }
    return rows
}

private func drawPanel(
    _ family: ChartFamily,
    _ series: [String: [(x: Double, y: Double, scenario: String)]],
    seriesOrder: [String],
    frame: (x: Double, y: Double, width: Double, height: Double)
) -> String {
    let points = series.values.flatMap { $0 }
    let yTicks = decades(points.map(\.y))
    let xTicks = family.xIsLogarithmic ? decades(points.map(\.x)) : integers(points.map(\.x))
    func position(_ value: Double, _ ticks: [Double], logarithmic: Bool) -> Double {
        let (low, high) = (ticks.first!, ticks.last!)
        return logarithmic ? (log10(value) - log10(low)) / (log10(high) - log10(low)) : (value - low) / (high - low)
    }
    func px(_ x: Double) -> Double { frame.x + position(x, xTicks, logarithmic: family.xIsLogarithmic) * frame.width }
    func py(_ y: Double) -> Double { frame.y + frame.height - position(y, yTicks, logarithmic: true) * frame.height }

    var svg = "<g>\n"
    svg +=
        "<text x=\"\(fmt(frame.x + frame.width / 2))\" y=\"\(fmt(frame.y - 12))\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">\(escape(family.title))</text>\n"
    // Grid: a labelled line per tick; on a log scale, light lines for 2–9 × each decade.
    func grid(_ ticks: [Double], logarithmic: Bool, line: (Double, String) -> String, label: (Double) -> String) -> String {
        var svg = ""
        for (index, tick) in ticks.enumerated() {
            svg += line(tick, "#ccc") + label(tick) + "\n"
            if logarithmic, index + 1 < ticks.count {
                for multiple in 2...9 { svg += line(tick * Double(multiple), "#eee") + "\n" }
            }
        }
        return svg
    }
    func gridLine(from start: (x: Double, y: Double), to end: (x: Double, y: Double), stroke: String) -> String {
        "<line x1=\"\(fmt(start.x))\" y1=\"\(fmt(start.y))\" x2=\"\(fmt(end.x))\" y2=\"\(fmt(end.y))\" stroke=\"\(stroke)\"/>"
    }
    svg += grid(yTicks, logarithmic: true) { y, stroke in
        gridLine(from: (frame.x, py(y)), to: (frame.x + frame.width, py(y)), stroke: stroke)
    } label: { y in
        "<text x=\"\(fmt(frame.x - 6))\" y=\"\(fmt(py(y) + 4))\" text-anchor=\"end\">\(formatDuration(y))</text>"
    }
    svg += grid(xTicks, logarithmic: family.xIsLogarithmic) { x, stroke in
        gridLine(from: (px(x), frame.y), to: (px(x), frame.y + frame.height), stroke: stroke)
    } label: { x in
        "<text x=\"\(fmt(px(x)))\" y=\"\(fmt(frame.y + frame.height + 16))\" text-anchor=\"middle\">\(formatCount(x))</text>"
    }
    svg +=
        "<rect x=\"\(fmt(frame.x))\" y=\"\(fmt(frame.y))\" width=\"\(fmt(frame.width))\" height=\"\(fmt(frame.height))\" fill=\"none\" stroke=\"#333\"/>\n"
    svg +=
        "<text x=\"\(fmt(frame.x + frame.width / 2))\" y=\"\(fmt(frame.y + frame.height + 36))\" text-anchor=\"middle\">\(escape(family.xAxis))\(family.xIsLogarithmic ? ", log scale" : "")</text>\n"
    let yLabelX = frame.x - 62, yLabelY = frame.y + frame.height / 2
    svg +=
        "<text x=\"\(fmt(yLabelX))\" y=\"\(fmt(yLabelY))\" text-anchor=\"middle\" transform=\"rotate(-90 \(fmt(yLabelX)) \(fmt(yLabelY)))\">\(escape(family.yAxis)), log scale</text>\n"
    // Curves, in legend order so colours match.
    for name in seriesOrder {
        guard let line = series[name]?.sorted(by: { $0.x < $1.x }) else { continue }
        let colour = palette[seriesOrder.firstIndex(of: name)! % palette.count]
        let path = line.map { "\(fmt(px($0.x))),\(fmt(py($0.y)))" }.joined(separator: " ")
        svg += "<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(colour)\" stroke-width=\"2.5\"/>\n"
        for point in line {
            svg += "<circle cx=\"\(fmt(px(point.x)))\" cy=\"\(fmt(py(point.y)))\" r=\"3.5\" fill=\"\(colour)\">"
            svg += "<title>\(escape(point.scenario)): \(formatNanoseconds(point.y)) ns</title></circle>\n"
        }
    }
    return svg + "</g>\n"
}

/// Powers of ten from the one at or below the smallest value to the one at or above the largest.
private func decades(_ values: [Double]) -> [Double] {
    let positive = values.filter { $0 > 0 }
    guard let smallest = positive.min(), let largest = positive.max() else { return [1, 10] }
    let low = floor(log10(smallest)), high = max(ceil(log10(largest)), low + 1)
    return stride(from: low, through: high, by: 1).map { pow(10, $0) }
}

/// Every integer from the smallest value to the largest.
private func integers(_ values: [Double]) -> [Double] {
    let low = floor(values.min() ?? 0), high = max(ceil(values.max() ?? 1), low + 1)
    return stride(from: low, through: high, by: 1).map { $0 }
}

/// "1 ns", "100 ns", "1 µs", "10 ms".
private func formatDuration(_ nanoseconds: Double) -> String {
    let units: [(Double, String)] = [(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1, "ns")]
    for (scale, unit) in units where nanoseconds >= scale {
        return "\(formatNumber(nanoseconds / scale)) \(unit)"
    }
    return "\(formatNumber(nanoseconds)) ns"
}

/// "1", "1,000", "10,000".
func formatCount(_ value: Double) -> String {
    guard value == value.rounded(), value.magnitude < 1e15 else { return formatNumber(value) }
    var digits = String(Int(value))
    var index = digits.endIndex
    while digits.distance(from: digits.startIndex, to: index) > 3 {
        index = digits.index(index, offsetBy: -3)
        digits.insert(",", at: index)
    }
    return digits
}

private func fmt(_ value: Double) -> String { String(format: "%.1f", value) }
private func int(_ value: Double) -> String { String(Int(value.rounded())) }

private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
}
